#include "baton/pipeline/manifest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "baton/core/crc32.h"
#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A manifest larger than this is not one baton wrote (a million layers' entries fit).
constexpr std::uintmax_t kMaxManifestBytes = 512u << 20;

// A JSON value quoted in a message: one line, short.
std::string shown(const json& value) {
  return printable(value.dump(-1, ' ', false, json::error_handler_t::replace), 64);
}

// One file or folder name: not empty, not "." or "..", no '/'.
bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// A relative path made of plain names.
bool relative_inside(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    if (!plain_name(path.substr(start, slash - start))) return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

// An integer field in [low, high], or a one-line error naming it.
int64_t integer_in(const json& value, const std::string& what, int64_t low, int64_t high,
                   const std::string& path) {
  const bool integer = value.is_number_integer();
  // nlohmann parses every non-negative integer as unsigned: compare in its own type.
  const bool in_range =
      integer && (value.is_number_unsigned()
                      ? value.get<uint64_t>() <= static_cast<uint64_t>(high) &&
                            (low <= 0 || value.get<uint64_t>() >= static_cast<uint64_t>(low))
                      : value.get<int64_t>() >= low && value.get<int64_t>() <= high);
  BATON_CHECK(in_range, "[checkpoint] ", path, ": ", what, " is ", shown(value),
              "; it must be an integer in [", low, ", ", high, "]");
  return value.get<int64_t>();
}

void check_files(const json& manifest, const std::string& path) {
  const std::string folder = manifest["folder"];
  const int64_t layers = manifest["model"]["layers"];
  const bool with_optimizer = manifest.contains("optimizer") && manifest["optimizer"].is_object();
  BATON_CHECK(manifest["files"].is_array(), "[checkpoint] ", path, ": \"files\" is not a list");
  std::vector<int> layer_files(static_cast<size_t>(layers), 0), optimizer_files(layers, 0);
  int rng_files = 0;
  std::set<std::string> paths;
  for (const json& f : manifest["files"]) {
    BATON_CHECK(f.is_object() && f.contains("path") && f["path"].is_string(), "[checkpoint] ", path,
                ": a file entry has no \"path\"");
    const std::string file = f["path"];
    const std::string named = "[checkpoint] " + path + ": file \"" + printable(file, 256) + "\"";
    BATON_CHECK(relative_inside(file), named,
                " is not a relative path inside the checkpoint's folder (no \"..\", \".\" or "
                "leading \"/\")");
    BATON_CHECK(folder == kStepManifestFolder || file.rfind(folder + "/", 0) == 0, named,
                " is not inside the manifest's folder \"", printable(folder), "\"");
    BATON_CHECK(paths.insert(file).second, named, " is listed twice");
    const std::string kind = f.value("kind", "");
    BATON_CHECK(kind == "layer" || kind == "optimizer" || kind == "rng", named, " has kind \"",
                printable(kind), "\" (expected layer, optimizer or rng)");
    BATON_CHECK(f.contains("bytes"), named, " has no \"bytes\"");
    integer_in(f["bytes"], "file \"" + printable(file, 256) + "\"'s \"bytes\"", 0, int64_t{1} << 50,
               path);
    uint32_t crc = 0;
    BATON_CHECK(f.contains("crc32") && f["crc32"].is_string() && parse_crc32(f["crc32"], &crc),
                "[checkpoint] ", path, " gives file ", printable(file, 256),
                " no \"crc32\" of 8 lower-case hex digits");
    if (kind == "rng") {
      BATON_CHECK(!f.contains("layer"), named, " is the rng file but names a layer");
      ++rng_files;
      continue;
    }
    BATON_CHECK(f.contains("layer"), named, " names no layer");
    const int64_t layer = integer_in(f["layer"], "file \"" + printable(file, 256) + "\"'s layer", 0,
                                     layers - 1, path);
    BATON_CHECK(kind == "layer" || with_optimizer, named,
                " holds optimizer state, but the manifest's \"optimizer\" is null");
    std::vector<int>& count = kind == "layer" ? layer_files : optimizer_files;
    BATON_CHECK(++count[layer] == 1, "[checkpoint] ", path, " lists two ", kind,
                " files for layer ", layer);
  }
  for (int64_t layer = 0; layer < layers; ++layer) {
    BATON_CHECK(layer_files[layer] == 1, "[checkpoint] ", path, " lists no file for layer ", layer,
                " of the model's ", layers, " (a layer is missing from the checkpoint)");
    BATON_CHECK(!with_optimizer || optimizer_files[layer] == 1, "[checkpoint] ", path,
                " lists no optimizer file for layer ", layer, " of the model's ", layers);
  }
  BATON_CHECK(rng_files == 1, "[checkpoint] ", path, " lists ", rng_files,
              " rng files; a checkpoint has exactly one");
}

void check_kept(const json& manifest, const std::string& path) {
  if (!manifest.contains("kept")) return;
  const json& kept = manifest["kept"];
  BATON_CHECK(kept.is_array() && !kept.empty() && !is_step_manifest(manifest), "[checkpoint] ",
              path, ": \"kept\" must be a non-empty list of step folders, in a root manifest only");
  std::set<std::string> names;
  for (const json& k : kept) {
    BATON_CHECK(k.is_string() && plain_name(k) && k.get<std::string>().rfind("step_", 0) == 0 &&
                    names.insert(k).second,
                "[checkpoint] ", path, ": \"kept\" holds ", shown(k),
                ", not a distinct step_* folder name");
  }
  BATON_CHECK(kept.front() == manifest["folder"], "[checkpoint] ", path,
              ": \"kept\" must start with the manifest's own folder ", shown(manifest["folder"]));
}

void check_tied(const json& model, const std::string& path) {
  if (!model.contains("tied")) return;
  bool ok = model["tied"].is_array();
  for (const json& group : ok ? model["tied"] : json::array()) {
    ok = ok && group.is_array();
    for (const json& copy : ok ? group : json::array()) {
      ok = ok && copy.is_object() && copy.contains("layer") && copy["layer"].is_number_integer() &&
           copy.contains("name") && copy["name"].is_string();
    }
  }
  BATON_CHECK(ok, "[checkpoint] ", path,
              ": model \"tied\" must be a list of lists of {\"layer\", \"name\"}");
}

std::string quoted(const fs::path& p) {
  return p.string();
}

// Reads the whole file and returns its CRC-32; `bytes` is its size.
uint32_t file_crc32(const fs::path& file, std::uintmax_t* bytes) {
  std::ifstream in(file, std::ios::binary);
  BATON_CHECK(in.good(), "[checkpoint] file ", quoted(file),
              " cannot be read: ", std::strerror(errno));
  std::vector<char> buffer(1 << 20);
  uint32_t crc = 0;
  *bytes = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    crc = crc32(buffer.data(), n, crc);
    *bytes += n;
  }
  BATON_CHECK(in.eof(), "[checkpoint] file ", quoted(file), " cannot be read");
  return crc;
}

// `inner` lies inside `outer` (both canonical).
bool inside(const fs::path& inner, const fs::path& outer) {
  const std::string o = outer.string(), i = inner.string();
  return i.size() > o.size() && i.compare(0, o.size(), o) == 0 &&
         (o.back() == '/' || i[o.size()] == '/');
}

// Names baton gives the files of a step folder, and their temporary files.
bool baton_file_name(const std::string& name) {
  const std::string base = name.substr(0, name.find(".tmp."));
  if (base == "rng.pt" || base == kManifest) return true;
  unsigned layer = 0;
  char rest[16] = {0};
  return std::sscanf(base.c_str(), "layer_%5u%15s", &layer, rest) == 2 &&
         (std::strcmp(rest, ".pt") == 0 || std::strcmp(rest, ".optim.pt") == 0);
}

}  // namespace

std::string crc32_text(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

bool parse_crc32(const std::string& text, uint32_t* crc) {
  if (text.size() != 8) return false;
  uint32_t value = 0;
  for (char c : text) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return false;
    value = value << 4 | static_cast<uint32_t>(digit);
  }
  *crc = value;
  return true;
}

bool is_step_manifest(const json& manifest) {
  return manifest.is_object() && manifest.contains("folder") &&
         manifest["folder"] == kStepManifestFolder;
}

json parse_manifest(std::string_view text, const std::string& path) {
  json manifest;
  try {
    manifest = json::parse(text);
  } catch (const json::exception& e) {
    BATON_CHECK(false, "[checkpoint] ", path,
                " is not valid JSON (truncated?): ", printable(e.what(), 200));
  }
  try {
    BATON_CHECK(manifest.is_object() && manifest.value("format", "") == "baton-checkpoint",
                "[checkpoint] ", path,
                " is not a baton checkpoint manifest (no \"format\": \"baton-checkpoint\")");
    const json version = manifest.value("version", json(-1));
    BATON_CHECK(version.is_number_integer() && version.get<int64_t>() >= kOldestReadableVersion &&
                    version.get<int64_t>() <= kFormatVersion,
                "[checkpoint] ", path, " has version ", shown(version),
                "; this baton reads versions ", kOldestReadableVersion, " to ", kFormatVersion);
    for (const char* key : {"step", "folder", "model", "files"}) {
      BATON_CHECK(manifest.contains(key), "[checkpoint] ", path, " lacks \"", key, "\"");
    }
    integer_in(manifest["step"], "\"step\"", 0, kMaxStep, path);
    const json& folder = manifest["folder"];
    BATON_CHECK(folder.is_string() && (folder == kStepManifestFolder || plain_name(folder)),
                "[checkpoint] ", path, ": \"folder\" is ", shown(folder),
                "; it must be one folder name inside the checkpoint (or \".\")");
    const json& model = manifest["model"];
    BATON_CHECK(model.is_object() && model.contains("name") && model["name"].is_string() &&
                    model.contains("layers"),
                "[checkpoint] ", path, ": \"model\" must hold \"name\" and \"layers\"");
    integer_in(model["layers"], "the model's \"layers\"", 1, kMaxLayers, path);
    check_tied(model, path);
    if (manifest.contains("optimizer")) {
      const json& o = manifest["optimizer"];
      BATON_CHECK(o.is_null() || (o.is_object() && o.contains("kind") && o["kind"].is_string()),
                  "[checkpoint] ", path, ": \"optimizer\" must be null or hold a \"kind\"");
    }
    check_kept(manifest, path);
    check_files(manifest, path);
  } catch (const json::exception& e) {
    BATON_CHECK(false, "[checkpoint] ", path, " is malformed: ", printable(e.what(), 200));
  }
  return manifest;
}

json read_manifest(const std::string& dir) {
  const fs::path path = fs::path(dir) / kManifest;
  std::error_code error;
  BATON_CHECK(!dir.empty(), "[checkpoint] the checkpoint folder's name is empty");
  BATON_CHECK(fs::exists(dir, error), "[checkpoint] folder ", dir,
              " does not exist: no checkpoint there");
  BATON_CHECK(fs::is_directory(dir, error), "[checkpoint] ", dir,
              " is a file, not a checkpoint's folder");
  const fs::file_status status = fs::status(path, error);
  BATON_CHECK(fs::exists(status), "[checkpoint] ", quoted(path), " is missing: ", dir,
              " holds no checkpoint (or its first save never finished)");
  BATON_CHECK(fs::is_regular_file(status), "[checkpoint] ", quoted(path), " is ",
              fs::is_directory(status) ? "a folder" : "not a regular file",
              ", not a checkpoint manifest");
  const std::uintmax_t size = fs::file_size(path, error);
  BATON_CHECK(!error && size <= kMaxManifestBytes, "[checkpoint] ", quoted(path), " has ", size,
              " bytes, more than a manifest's ", kMaxManifestBytes);
  std::ifstream in(path, std::ios::binary);
  BATON_CHECK(in.good(), "[checkpoint] ", quoted(path), " cannot be read: ", std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_manifest(text, path.string());
}

json check(const std::string& dir) {
  const fs::path path = fs::path(dir) / kManifest;
  json manifest = read_manifest(dir);
  std::error_code error;
  const fs::path root = fs::canonical(dir, error);
  BATON_CHECK(!error, "[checkpoint] folder ", dir, " cannot be resolved: ", error.message());
  for (const json& f : manifest["files"]) {
    const fs::path file = fs::path(dir) / f["path"].get<std::string>();
    const int64_t bytes = f["bytes"];
    BATON_CHECK(fs::is_regular_file(file, error), "[checkpoint] file ", quoted(file),
                " is missing (", quoted(path), " lists it)");
    const fs::path resolved = fs::canonical(file, error);
    BATON_CHECK(!error && inside(resolved, root), "[checkpoint] file ", quoted(file),
                " resolves to ", resolved.string(), ", outside the checkpoint's folder ",
                root.string());
    const auto on_disk = static_cast<int64_t>(fs::file_size(file, error));
    BATON_CHECK(on_disk == bytes, "[checkpoint] file ", quoted(file), " has ", on_disk,
                " bytes but ", quoted(path), " says ", bytes, " (truncated or replaced)");
    uint32_t expected = 0;
    parse_crc32(f["crc32"], &expected);
    std::uintmax_t read = 0;
    const uint32_t crc = file_crc32(file, &read);
    BATON_CHECK(crc == expected, "[checkpoint] file ", quoted(file), " (", read,
                " bytes) is corrupt: its CRC-32 is ", crc32_text(crc), " but the manifest says ",
                crc32_text(expected));
  }
  return manifest;
}

std::vector<std::string> kept_folders(const json& manifest) {
  std::vector<std::string> out;
  if (manifest.contains("kept")) {
    for (const json& k : manifest["kept"]) out.push_back(k);
  } else if (!is_step_manifest(manifest)) {
    out.push_back(manifest["folder"]);
  }
  return out;
}

void prepare_save_folder(const std::string& where, const std::string& dir) {
  BATON_CHECK(!dir.empty(), where,
              " needs a folder name, got an empty string (an unset variable?)");
  std::error_code error;
  const fs::file_status link = fs::symlink_status(dir, error);
  const fs::file_status status = fs::status(dir, error);
  if (fs::is_symlink(link) && !fs::exists(status)) {
    BATON_CHECK(false, where, " ", dir, " is a link to ", fs::read_symlink(dir, error).string(),
                ", which does not exist; name a folder");
  }
  if (fs::exists(status)) {
    BATON_CHECK(fs::is_directory(status), where, " ", dir, " is a file; name a folder");
    const fs::path manifest_path = fs::path(dir) / kManifest;
    const bool has_manifest = fs::exists(fs::symlink_status(manifest_path, error));
    if (!has_manifest) {
      // Empty, or what saves that never committed left: baton's own.
      const std::string foreign = first_foreign_entry(dir);
      BATON_CHECK(foreign.empty(), where, " ", dir, " is not empty and holds no baton checkpoint (",
                  printable(foreign, 128), " is not what a baton save leaves, and there is no ",
                  kManifest,
                  "); baton saves only into an empty folder or a checkpoint folder of its own");
    } else {
      BATON_CHECK(fs::is_regular_file(manifest_path, error), where, " ", dir, ": its ", kManifest,
                  " is not a regular file, so baton will not write there");
      json manifest;
      try {
        manifest = read_manifest(dir);
      } catch (const Error& e) {
        BATON_CHECK(false, where, " ", dir, " is not empty and its ", kManifest,
                    " is not a baton checkpoint's, so baton will not write there: ", e.what());
      }
      BATON_CHECK(!is_step_manifest(manifest), where, " ", dir,
                  " is one saved step inside a checkpoint folder; save into that folder (its "
                  "parent) or an empty one");
    }
  } else {
    const fs::path parent = fs::path(dir).lexically_normal().parent_path().empty()
                                ? fs::path(".")
                                : fs::path(dir).lexically_normal().parent_path();
    BATON_CHECK(fs::is_directory(parent, error), where, " ", dir, ": folder ", parent.string(),
                " does not exist");
    BATON_CHECK(::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST, where, " ", dir,
                " cannot be created: ", std::strerror(errno));
    BATON_CHECK(fs::is_directory(dir, error), where, " ", dir, " cannot be created as a folder");
  }
  const std::string probe = (fs::path(dir) / (kProbePrefix + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  BATON_CHECK(fd >= 0, where, " ", dir, " cannot be written: ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

bool is_baton_step_file(const std::string& name) {
  return baton_file_name(name);
}

bool is_leftover(const std::string& dir, const std::string& name) {
  std::error_code error;
  const fs::path path = fs::path(dir) / name;
  const fs::file_status status = fs::symlink_status(path, error);
  // Gone since the folder was listed: another rank's probe, created and
  // removed while this rank looked. What is no longer there is nobody's.
  if (status.type() == fs::file_type::not_found) return true;
  if (error || fs::is_symlink(status)) return false;
  const bool temporary_manifest = name.rfind(std::string(kManifest) + ".tmp.", 0) == 0;
  const bool probe = name.rfind(kProbePrefix, 0) == 0;
  if (temporary_manifest || probe) return fs::is_regular_file(status);
  if (name.rfind("step_", 0) != 0 || !fs::is_directory(status)) return false;
  for (const auto& inner : fs::directory_iterator(path, error)) {
    const fs::file_status inner_status = inner.symlink_status(error);
    if (error || !fs::is_regular_file(inner_status) ||
        !baton_file_name(inner.path().filename().string()))
      return false;
  }
  return !error;
}

std::string first_foreign_entry(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!is_leftover(dir, name)) return name;
  }
  return error ? dir : std::string();
}

}  // namespace baton::checkpoint
