#include "baton/data/text_documents.h"

#include <nlohmann/json.hpp>

#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton::data {
namespace {

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

DocumentReader::DocumentReader(const std::vector<std::string>& paths, bool per_line)
    : per_line_(per_line) {
  for (const std::string& path : paths) {
    files_.emplace_back("[data.prepare] --input", path);
    files_.back().advise_sequential();
    json_lines_.push_back(ends_with(path, ".jsonl"));
    total_bytes_ += files_.back().size_bytes();
  }
}

void DocumentReader::rewind() {
  file_ = 0;
  position_ = 0;
  bytes_before_ = 0;
  line_number_ = 0;
  documents_ = 0;
  empty_documents_ = 0;
}

std::string_view DocumentReader::next_line() {
  const std::string_view bytes = files_[file_].bytes();
  const size_t end = bytes.find('\n', position_);
  const size_t stop = end == std::string_view::npos ? bytes.size() : end;
  std::string_view line = bytes.substr(position_, stop - position_);
  position_ = end == std::string_view::npos ? bytes.size() : end + 1;
  ++line_number_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool DocumentReader::next_in_file(std::string_view* text) {
  const MappedFile& file = files_[file_];
  while (position_ < file.size_bytes()) {
    if (!json_lines_[file_] && !per_line_) {
      *text = file.bytes();
      position_ = file.size_bytes();
      return true;
    }
    const std::string_view line = next_line();
    if (!json_lines_[file_]) {
      *text = line;
      return true;
    }
    if (blank(line)) continue;
    const std::string where =
        detail::concat("[data.prepare] ", printable(file.path(), 256), " line ", line_number_);
    nlohmann::json document;
    try {
      document = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      BATON_CHECK(false, where, " is not JSON: ", printable(e.what(), 200));
    }
    const auto field = document.is_object() ? document.find("text") : document.end();
    BATON_CHECK(document.is_object() && field != document.end() && field->is_string(), where,
                " has no string field \"text\"; a .jsonl input holds one JSON object a line, "
                "its document in \"text\"");
    decoded_ = field->get<std::string>();
    *text = decoded_;
    return true;
  }
  return false;
}

bool DocumentReader::next(std::string_view* text) {
  while (file_ < files_.size()) {
    std::string_view document;
    if (!next_in_file(&document)) {
      bytes_before_ += files_[file_].size_bytes();
      ++file_;
      position_ = 0;
      line_number_ = 0;
      continue;
    }
    if (document.empty()) {
      ++empty_documents_;
      continue;
    }
    ++documents_;
    *text = document;
    return true;
  }
  return false;
}

}  // namespace baton::data
