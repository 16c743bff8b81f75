// libFuzzer target for a checkpoint's manifest.json (torch-free:
// baton/pipeline/manifest.h): any input either parses into a manifest that
// keeps parse_manifest's promises, or throws baton::Error with a one-line
// message, bounded, with no control byte. Anything else (a crash, another
// exception such as nlohmann's own, a sanitizer report) is a bug. Built with
// -DBATON_FUZZ=ON; run by FUZZ_TARGET=checkpoint_manifest scripts/fuzz.sh.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "baton/core/error.h"
#include "baton/pipeline/manifest.h"
#include "fuzz/one_line_message.h"

namespace {

[[noreturn]] void bug(const char* what, const std::string& detail) {
  baton::fuzz::bug("checkpoint_manifest_fuzz", what, detail);
}

void check_message(const std::string& text) {
  baton::fuzz::check_one_line_message("checkpoint_manifest_fuzz", text);
}

// True when a '/'-separated relative path has a component that leaves or
// names its folder: "", "." or "..". A name that merely contains ".."
// ("layer_00001..pt") stays inside.
bool leaves_folder(const std::string& path) {
  if (path.empty() || path.front() == '/') return true;
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return true;
    if (end == path.size()) return false;
    start = end + 1;
  }
}

// What an accepted manifest promises the loader.
void check_accepted(const nlohmann::json& m) {
  using namespace baton::checkpoint;
  const int64_t step = m["step"].get<int64_t>();
  if (step < 0 || step > kMaxStep) bug("step out of range accepted", m["step"].dump());
  const int64_t layers = m["model"]["layers"].get<int64_t>();
  std::set<int64_t> covered;
  for (const auto& f : m["files"]) {
    const std::string path = f["path"];
    if (leaves_folder(path)) bug("a path outside the folder accepted", path);
    if (f["kind"] == "layer") covered.insert(f["layer"].get<int64_t>());
  }
  if (static_cast<int64_t>(covered.size()) != layers) bug("layers not covered", m.dump());
  for (const std::string& k : kept_folders(m)) {
    if (k.find('/') != std::string::npos) bug("a kept folder with a slash", k);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    check_accepted(baton::checkpoint::parse_manifest(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/manifest.json"));
  } catch (const baton::Error& e) {
    check_message(e.what());
  }
  return 0;
}
