// checkpoint::parse_manifest and prepare_save_folder: every rule a manifest
// must keep before baton reads a file it names, each broken once against a
// manifest that passes, and the folders baton refuses to save into.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/core/error.h"
#include "baton/pipeline/manifest.h"

namespace baton::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;

// A manifest of a 2-layer model with an optimizer, as baton writes it.
json good() {
  json files = json::array();
  for (int layer = 0; layer < 2; ++layer) {
    files.push_back({{"path", "step_00000003/layer_0000" + std::to_string(layer) + ".pt"},
                     {"kind", "layer"},
                     {"layer", layer},
                     {"bytes", 10},
                     {"crc32", "0000abcd"}});
    files.push_back({{"path", "step_00000003/layer_0000" + std::to_string(layer) + ".optim.pt"},
                     {"kind", "optimizer"},
                     {"layer", layer},
                     {"bytes", 10},
                     {"crc32", "0000abcd"}});
  }
  files.push_back(
      {{"path", "step_00000003/rng.pt"}, {"kind", "rng"}, {"bytes", 10}, {"crc32", "0000abcd"}});
  return {{"format", "baton-checkpoint"},
          {"version", kFormatVersion},
          {"step", 3},
          {"folder", "step_00000003"},
          {"model", {{"name", "mlp"}, {"layers", 2}}},
          {"optimizer", {{"kind", "adam"}, {"lr", 0.1}}},
          {"kept", {"step_00000003", "step_00000001"}},
          {"files", files}};
}

std::string error_of(const std::function<void(json&)>& change) {
  json m = good();
  change(m);
  try {
    parse_manifest(m.dump(), "ck/manifest.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Manifest, AManifestAsBatonWritesItIsAccepted) {
  EXPECT_EQ(error_of([](json&) {}), "accepted");
  EXPECT_EQ(kept_folders(good()), (std::vector<std::string>{"step_00000003", "step_00000001"}));
}

TEST(Manifest, AStepOutsideZeroToTheLargestIntIsRefused) {
  for (const char* step :
       {"-5", "-1", "1e30", "9223372036854775813", "2147483648", "3.5", "\"3\""}) {
    EXPECT_THAT(error_of([&](json& m) { m["step"] = json::parse(step); }),
                HasSubstr("\"step\" is " + json::parse(step).dump() +
                          "; it must be an integer in [0, 2147483647]"))
        << step;
  }
  EXPECT_EQ(error_of([](json& m) { m["step"] = 2147483647; }), "accepted");
}

TEST(Manifest, APathLeavingTheFolderIsRefused) {
  for (const char* path : {"step_00000003/../../etc/passwd", "/etc/passwd",
                           "step_00000003/./rng.pt", "step_00000003//rng.pt", ""}) {
    EXPECT_THAT(error_of([&](json& m) { m["files"][4]["path"] = path; }),
                HasSubstr("is not a relative path inside the checkpoint's folder"))
        << path;
  }
  EXPECT_THAT(error_of([](json& m) { m["files"][4]["path"] = "step_00000001/rng.pt"; }),
              HasSubstr("is not inside the manifest's folder \"step_00000003\""));
  EXPECT_THAT(error_of([](json& m) { m["folder"] = "../elsewhere"; }),
              HasSubstr("\"folder\" is \"../elsewhere\"; it must be one folder name"));
}

// Only a ".." component leaves the folder; a name holding two dots stays in
// it (the fuzzer's first oracle confused the two).
TEST(Manifest, ANameHoldingTwoDotsStaysInsideTheFolder) {
  EXPECT_EQ(error_of([](json& m) { m["files"][4]["path"] = "step_00000003/rng..pt"; }), "accepted");
  EXPECT_EQ(error_of([](json& m) { m["files"][4]["path"] = "step_00000003/..rng"; }), "accepted");
}

TEST(Manifest, EveryLayerNeedsExactlyOneFileAndOneOptimizerFile) {
  EXPECT_THAT(error_of([](json& m) { m["files"].erase(2); }),
              HasSubstr("lists no file for layer 1 of the model's 2 (a layer is missing"));
  EXPECT_THAT(error_of([](json& m) { m["files"].erase(3); }),
              HasSubstr("lists no optimizer file for layer 1"));
  EXPECT_THAT(error_of([](json& m) { m["files"][2]["layer"] = 0; }),
              HasSubstr("lists two layer files for layer 0"));
  EXPECT_THAT(
      error_of([](json& m) { m["files"][0]["layer"] = 2; }),
      HasSubstr(
          "file \"step_00000003/layer_00000.pt\"'s layer is 2; it must be an integer in [0, 1]"));
  EXPECT_THAT(error_of([](json& m) { m["files"].push_back(m["files"][0]); }),
              HasSubstr("is listed twice"));
  EXPECT_THAT(error_of([](json& m) { m["files"].erase(4); }), HasSubstr("lists 0 rng files"));
  EXPECT_THAT(error_of([](json& m) { m["optimizer"] = nullptr; }),
              HasSubstr("holds optimizer state, but the manifest's \"optimizer\" is null"));
}

TEST(Manifest, MalformedFieldsAreNamedNotThrownAsJsonErrors) {
  EXPECT_THAT(error_of([](json& m) { m["files"][0]["crc32"] = "xyz"; }),
              HasSubstr("no \"crc32\" of 8"));
  EXPECT_THAT(error_of([](json& m) { m["files"][0]["bytes"] = -1; }), HasSubstr("\"bytes\" is -1"));
  EXPECT_THAT(error_of([](json& m) { m["files"][0]["kind"] = 7; }), HasSubstr("is malformed"));
  EXPECT_THAT(error_of([](json& m) { m["model"]["layers"] = 0; }),
              HasSubstr("the model's \"layers\" is 0; it must be an integer in [1,"));
  EXPECT_THAT(error_of([](json& m) { m["kept"] = {"step_00000001"}; }),
              HasSubstr("\"kept\" must start with the manifest's own folder"));
  EXPECT_THAT(error_of([](json& m) {
                m["kept"] = {"step_00000003", "../x"};
              }),
              HasSubstr("not a distinct step_* folder name"));
  EXPECT_THAT(error_of([](json& m) { m["version"] = 1; }),
              HasSubstr("has version 1; this baton reads versions 2 to"));
  EXPECT_THAT(error_of([](json& m) { m["model"]["tied"] = 3; }),
              HasSubstr("model \"tied\" must be a list"));
  try {
    parse_manifest("{\"format\": ", "ck/manifest.json");
    FAIL() << "truncated JSON accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("ck/manifest.json is not valid JSON (truncated?)"));
  }
}

struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "baton_manifest_XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

std::string prepare_error(const std::string& dir) {
  try {
    prepare_save_folder("[test] --save", dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Manifest, SavingGoesOnlyIntoAnEmptyOrABatonFolderAndAMissingOneIsMadeNow) {
  TempDir tmp;
  const fs::path root(tmp.path);
  EXPECT_EQ(prepare_error((root / "new").string()), "accepted");
  EXPECT_TRUE(fs::is_directory(root / "new"));
  EXPECT_EQ(prepare_error((root / "new").string()), "accepted");  // empty
  std::ofstream(root / "new" / "manifest.json") << good().dump();
  EXPECT_EQ(prepare_error((root / "new").string()), "accepted");  // baton's
  fs::create_directory(root / "other");
  std::ofstream(root / "other" / "a.txt") << "x";
  EXPECT_THAT(prepare_error((root / "other").string()), HasSubstr("holds no baton checkpoint"));
  json step = good();
  step["folder"] = ".";
  step.erase("kept");
  for (json& f : step["files"]) f["path"] = f["path"].get<std::string>().substr(14);
  fs::create_directory(root / "step");
  std::ofstream(root / "step" / "manifest.json") << step.dump();
  EXPECT_THAT(prepare_error((root / "step").string()),
              HasSubstr("is one saved step inside a checkpoint folder"));
  fs::create_symlink(root / "nowhere" / "x", root / "dangling");
  EXPECT_THAT(prepare_error((root / "dangling").string()),
              HasSubstr("which does not exist; name a folder"));
  EXPECT_THAT(prepare_error((root / "no" / "such").string()), HasSubstr("does not exist"));
  EXPECT_FALSE(fs::exists(root / "no"));
  EXPECT_THAT(prepare_error("/proc/baton_save_test"), HasSubstr("cannot be created"));
  EXPECT_THAT(prepare_error(""), HasSubstr("needs a folder name, got an empty string"));
}

// Every rank of a run checks the same --save folder at once, each creating
// and removing its probe file there: a probe that vanishes while another
// rank lists the folder is nothing foreign (CI saw "[rank 1] ...
// .baton-probe.14013 is not what a baton save leaves" from exactly this).
TEST(Manifest, RanksCheckingOneFolderAtOnceDoNotSeeEachOthersProbes) {
  TempDir tmp;
  const std::string dir = (fs::path(tmp.path) / "save").string();
  constexpr int kRanks = 4;
  constexpr int kChecks = 400;
  std::vector<pid_t> children;
  for (int r = 0; r < kRanks; ++r) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kChecks; ++i) {
        const std::string error = prepare_error(dir);
        if (error != "accepted") {
          std::fprintf(stderr, "rank %d: %s\n", r, error.c_str());
          ::_exit(1);
        }
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  EXPECT_EQ(failed, 0) << "ranks refused a folder holding only other ranks' probes";
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(Manifest, ABatonStepFileNameIsRecognisedAndNothingElse) {
  for (const char* name : {"layer_00003.pt", "layer_00003.optim.pt", "rng.pt", "manifest.json",
                           "layer_00003.pt.tmp.1234"}) {
    EXPECT_TRUE(is_baton_step_file(name)) << name;
  }
  for (const char* name : {"photo.jpg", "layer_00003.ptx", "layer_x.pt", "rng.pt.bak"}) {
    EXPECT_FALSE(is_baton_step_file(name)) << name;
  }
}

}  // namespace
}  // namespace baton::checkpoint
