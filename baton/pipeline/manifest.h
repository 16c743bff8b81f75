// A checkpoint's manifest and the folder it lives in, without LibTorch: what
// a manifest.json must hold before baton reads a file it names, and what a
// folder must be before baton saves into it. checkpoint.h has the format;
// this is the part `baton train` checks before any rank starts, and the part
// the manifest fuzzer (fuzz/checkpoint_manifest_fuzz.cpp) drives.
//
// Two kinds of manifest share one format:
//   - a root manifest, DIR/manifest.json, names the newest save's files
//     (paths "step_00000004/layer_00003.pt") and, in "kept", the step folders
//     baton wrote into DIR and still keeps, newest first;
//   - a step manifest, DIR/step_00000004/manifest.json, names the same files
//     relative to its own folder ("folder": "."), so that an older kept save
//     loads on its own (--resume DIR/step_00000002).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace baton::checkpoint {

// 2: each file's entry has "crc32". 3: "kept", step manifests, model "tied".
inline constexpr int kFormatVersion = 3;
inline constexpr int kOldestReadableVersion = 2;
inline constexpr const char* kManifest = "manifest.json";
// The largest step and layer count a manifest may state (--steps is an int).
inline constexpr int64_t kMaxStep = 2147483647;
inline constexpr int64_t kMaxLayers = 1 << 20;
// A step manifest's "folder".
inline constexpr const char* kStepManifestFolder = ".";
// The suffix of a step folder while its save is under way; never a checkpoint.
inline constexpr const char* kPartialSuffix = ".partial";

// "cbf43926": the form the manifest stores (Python: f"{zlib.crc32(data):08x}").
std::string crc32_text(uint32_t crc);
// Parses crc32_text's form; false unless `text` is 8 lower-case hex digits.
bool parse_crc32(const std::string& text, uint32_t* crc);

// Parses manifest text and checks everything that needs no other file:
// the format and version; "step" an integer in [0, kMaxStep]; "folder" one
// plain name (or "." in a step manifest); "model" {"name", "layers" in
// [1, kMaxLayers]}; "kept" (when present) distinct plain "step_" names; and
// "files", where every entry has a relative path inside the folder (no "..",
// no absolute path, no "." or empty part), distinct from the others, a kind
// (layer, optimizer or rng), a size >= 0 and a CRC-32, and together they
// cover every layer exactly once, every layer's optimizer file exactly once
// when "optimizer" is an object (none when it is null) and one rng file.
// `path` names the manifest in messages. Throws baton::Error, one line,
// naming the manifest and the first rule broken.
nlohmann::json parse_manifest(std::string_view text, const std::string& path);

// Reads DIR/manifest.json (a regular file) and parse_manifest()s it; reads
// no other file.
nlohmann::json read_manifest(const std::string& dir);

// Reads DIR/manifest.json (a regular file), parse_manifest()s it, and checks
// each file it names: inside DIR once links are resolved, a regular file of
// the recorded size, with the recorded CRC-32 (the whole file is read). Returns
// the manifest. Throws baton::Error naming the file and what is wrong.
nlohmann::json check(const std::string& dir);

// True when `manifest` is a step manifest (an older save inside a root).
bool is_step_manifest(const nlohmann::json& manifest);

// The step folders a root manifest names as baton's own, newest first: its
// "kept" list (version 3), or its "folder" alone (version 2).
std::vector<std::string> kept_folders(const nlohmann::json& manifest);

// Makes sure baton may save into `dir`, before any work: `dir` is an empty
// folder, one holding only leftovers (is_leftover: a save killed before its
// root manifest), or one holding a root manifest of a baton checkpoint; a
// missing folder
// is created (so a dangling link or a folder under /proc fails now, not at
// the end of training), and a probe file is created and removed in it.
// `where` starts the messages ("[train] --save"). Throws
// baton::Error otherwise: a file, a folder holding anything else, a step
// folder of another checkpoint, a folder that cannot be created or written.
void prepare_save_folder(const std::string& where, const std::string& dir);

// True for the names baton writes in a step folder (layer_00003.pt,
// layer_00003.optim.pt, rng.pt, manifest.json) and their ".tmp.<pid>" files.
bool is_baton_step_file(const std::string& name);

// The probe file prepare_save_folder creates and removes: ".baton-probe.<pid>".
inline constexpr const char* kProbePrefix = ".baton-probe.";

// True when DIR/name is something a save that did not finish leaves behind,
// with names baton writes and nothing else: a "step_*" folder (".partial" or
// not) holding only step files (is_baton_step_file), a "manifest.json.tmp.*"
// file, a probe file. The root manifest is a save's commit point: a step
// folder it does not name is not a checkpoint of DIR. Links are never
// leftovers; a name that no longer exists (another rank's probe, removed
// since DIR was listed) is.
bool is_leftover(const std::string& dir, const std::string& name);

// The first entry of DIR that is not a leftover; empty when there is none.
std::string first_foreign_entry(const std::string& dir);

}  // namespace baton::checkpoint
