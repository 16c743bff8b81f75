#include "baton/core/error.h"
#include "tools/cli.h"

namespace baton::cli {

void take_repeated_options(CLI::App* cmd) {
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void check_given_once(const CLI::App& cmd) {
  for (const CLI::Option* option : cmd.get_options()) {
    BATON_CHECK(option->get_expected_max() == 0 || option->count() <= 1, "[", cmd.get_name(), "] ",
                option->get_name(), " given more than once");
  }
}

}  // namespace baton::cli
