#include "baton/comm/rank_env.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "baton/core/error.h"

namespace baton::comm {
namespace {

const char* get(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// Parses the whole of `text` as an integer in [low, high].
int parse_int(const char* name, const char* text, long low, long high, const char* range) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  const bool ok = errno == 0 && end != text && *end == '\0' && value >= low && value <= high;
  BATON_CHECK(ok, "[comm.rank_env] ", name, " must be an integer in ", range, ", got \"", text,
              "\"");
  return static_cast<int>(value);
}

}  // namespace

std::optional<RankEnv> rank_env_from_environment() {
  const char* rank = get("RANK");
  const char* world_size = get("WORLD_SIZE");
  if (rank == nullptr && world_size == nullptr) return std::nullopt;
  BATON_CHECK(rank != nullptr && world_size != nullptr,
              "[comm.rank_env] RANK and WORLD_SIZE must be set together, got ",
              rank ? "RANK" : "WORLD_SIZE", " alone");
  RankEnv env;
  env.world_size = parse_int("WORLD_SIZE", world_size, 1, 1 << 20, "[1, 1048576]");
  env.rank = parse_int("RANK", rank, 0, env.world_size - 1,
                       ::baton::detail::concat("[0, WORLD_SIZE=", env.world_size, ")").c_str());
  const char* local_world_size = get("LOCAL_WORLD_SIZE");
  env.local_world_size =
      local_world_size == nullptr
          ? env.world_size
          : parse_int("LOCAL_WORLD_SIZE", local_world_size, 1, env.world_size, "[1, WORLD_SIZE]");
  const char* local_rank = get("LOCAL_RANK");
  env.local_rank =
      local_rank == nullptr
          ? env.rank % env.local_world_size
          : parse_int("LOCAL_RANK", local_rank, 0, env.local_world_size - 1,
                      ::baton::detail::concat("[0, LOCAL_WORLD_SIZE=", env.local_world_size, ")")
                          .c_str());
  const char* master_addr = get("MASTER_ADDR");
  BATON_CHECK(master_addr != nullptr, "[comm.rank_env] MASTER_ADDR must be set when RANK is");
  env.master_addr = master_addr;
  const char* master_port = get("MASTER_PORT");
  BATON_CHECK(master_port != nullptr, "[comm.rank_env] MASTER_PORT must be set when RANK is");
  env.master_port = parse_int("MASTER_PORT", master_port, 1, 65535, "[1, 65535]");
  const char* agent_store = get("TORCHELASTIC_USE_AGENT_STORE");
  if (agent_store != nullptr && std::string(agent_store) == "True") {
    // torchrun 2.x's agent hosts its own store on MASTER_PORT. LibTorch 2.x
    // builds join it; 1.13's TCPStore client cannot speak its wire format and
    // hosts a store on the next port instead.
    BATON_CHECK(env.master_port < 65535,
                "[comm.rank_env] MASTER_PORT must be below 65535 under "
                "torchrun's agent store (baton's store takes MASTER_PORT + 1), got ",
                env.master_port);
    env.agent_store_port = env.master_port;
    env.master_port += 1;
  }
  return env;
}

}  // namespace baton::comm
