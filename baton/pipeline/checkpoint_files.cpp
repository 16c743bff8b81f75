#include "baton/pipeline/checkpoint_files.h"

#include <ATen/core/Dict.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "baton/core/crc32.h"
#include "baton/core/error.h"
#include "baton/core/test_hooks.h"

namespace baton::checkpoint {

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

namespace {

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    BATON_CHECK(n > 0, "[checkpoint] cannot write ", path, ": ", std::strerror(errno));
    data += n;
    size -= static_cast<size_t>(n);
  }
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BATON_CHECK(in.good(), "[checkpoint] file ", path,
              " is missing or unreadable: ", std::strerror(errno));
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// torch.save's zip format (data.pkl and one record per tensor), without the
// TorchScript type tags that torch::pickle_save puts on a dict
// (torch.jit._pickle.restore_type_tag), which torch.load's default
// weights_only unpickler refuses (PyTorch 2.6+). Dicts of tensors and
// numbers, and tensors, pickle as torch.save writes them from Python.
std::vector<char> plain_pickle(const torch::IValue& value) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t size) { pickled.insert(pickled.end(), bytes, bytes + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> container;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    const char* bytes = static_cast<const char*>(data);
    container.insert(container.end(), bytes, bytes + size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  return container;
}

torch::IValue unpickle(const std::string& path, uint32_t expected_crc32) {
  const std::vector<char> bytes = read_bytes(path);
  const uint32_t crc = crc32(bytes.data(), bytes.size());
  BATON_CHECK(crc == expected_crc32, "[checkpoint] file ", path, " (", bytes.size(),
              " bytes) is corrupt: its CRC-32 is ", crc32_text(crc), " but the manifest says ",
              crc32_text(expected_crc32));
  try {
    return torch::pickle_load(bytes);
  } catch (const c10::Error& e) {
    throw Error(detail::concat("[checkpoint] file ", path, " (", bytes.size(),
                               " bytes) is not a tensor file torch.save wrote (truncated?): ",
                               first_line(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    throw Error(detail::concat(
        "[checkpoint] file ", path, " (", bytes.size(),
        " bytes) is not a tensor file torch.save wrote (truncated?): ", first_line(e.what())));
  }
}

const char* python_dtype(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat:
      return "float32";
    case torch::kDouble:
      return "float64";
    case torch::kHalf:
      return "float16";
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kLong:
      return "int64";
    case torch::kInt:
      return "int32";
    case torch::kShort:
      return "int16";
    case torch::kChar:
      return "int8";
    case torch::kByte:
      return "uint8";
    case torch::kBool:
      return "bool";
    default:
      return c10::toString(type);
  }
}

std::string numbered(const std::string& step_dir, const char* prefix, int layer,
                     const char* suffix) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%05d%s", prefix, layer, suffix);
  return step_dir + "/" + name;
}

}  // namespace

FileRecord write_atomically(const std::string& path, const std::vector<char>& bytes) {
  const std::string temp = detail::concat(path, ".tmp.", ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  BATON_CHECK(fd >= 0, "[checkpoint] cannot create ", temp, ": ", std::strerror(errno));
  try {
    write_all(fd, bytes.data(), bytes.size(), temp);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  // Data on disk before the name points at it: a crash leaves old or new, never a hole.
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    BATON_CHECK(false, "[checkpoint] cannot write ", path, ": ", std::strerror(error));
  }
  return FileRecord{static_cast<int64_t>(bytes.size()), crc32(bytes.data(), bytes.size())};
}

FileRecord write_tensors(const std::string& path, const NamedTensors& tensors) {
  c10::Dict<std::string, torch::Tensor> dict;
  // A clone owns exactly its elements: pickling a view would write its whole
  // storage. Files hold CPU tensors, whatever device the stages run on.
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor.detach().cpu().clone());
  return write_atomically(path, plain_pickle(torch::IValue(dict)));
}

FileRecord write_tensor(const std::string& path, const torch::Tensor& tensor) {
  return write_atomically(path, plain_pickle(torch::IValue(tensor.detach().cpu().clone())));
}

NamedTensors read_tensors(const std::string& path, uint32_t expected_crc32) {
  const torch::IValue value = unpickle(path, expected_crc32);
  BATON_CHECK(value.isGenericDict(), "[checkpoint] file ", path, " holds a ", value.tagKind(),
              ", not a dict of tensors");
  NamedTensors out;
  for (const auto& entry : value.toGenericDict()) {
    BATON_CHECK(entry.key().isString() && entry.value().isTensor(), "[checkpoint] file ", path,
                " holds a dict entry that is not (name: tensor)");
    out.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  }
  return out;
}

torch::Tensor read_tensor(const std::string& path, uint32_t expected_crc32) {
  const torch::IValue value = unpickle(path, expected_crc32);
  BATON_CHECK(value.isTensor(), "[checkpoint] file ", path, " holds a ", value.tagKind(),
              ", not a tensor");
  return value.toTensor();
}

nlohmann::json describe(const torch::Tensor& tensor) {
  return {{"shape", tensor.sizes().vec()}, {"dtype", python_dtype(tensor.scalar_type())}};
}

nlohmann::json describe(const NamedTensors& tensors) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, tensor] : tensors) out[name] = describe(tensor);
  return out;
}

std::string layer_file(const std::string& step_dir, int layer) {
  return numbered(step_dir, "layer_", layer, ".pt");
}

std::string optimizer_file(const std::string& step_dir, int layer) {
  return numbered(step_dir, "layer_", layer, ".optim.pt");
}

std::string rng_file(const std::string& step_dir) {
  return step_dir + "/rng.pt";
}

void kill_if_asked(int rank, int64_t step, const std::string& next_path) {
  bool parent = false;
  if (!hook_fires("BATON_TEST_KILL_IN_SAVE", rank, step, &parent)) return;
  // What a kill in the middle of a write leaves: half a temporary file.
  std::ofstream(detail::concat(next_path, ".tmp.", ::getpid()), std::ios::binary)
      << "PK\x03\x04half";
  if (parent) ::kill(::getppid(), SIGKILL);
  std::raise(SIGKILL);
}

}  // namespace baton::checkpoint
