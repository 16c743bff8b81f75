#include "baton/comm/comm_state.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "baton/core/error.h"

namespace baton::comm::detail {
namespace {

bool contains(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string peer_name(int peer) {
  return peer >= 0 ? ::baton::detail::concat("peer rank ", peer) : std::string("a peer");
}

}  // namespace

CommState::CommState(compat::BackendPtr backend, c10::intrusive_ptr<c10d::Store> store, int rank,
                     int world_size, std::chrono::milliseconds timeout, at::Device device,
                     std::string backend_name)
    : backend(std::move(backend)),
      store(std::move(store)),
      rank(rank),
      world_size(world_size),
      timeout(timeout),
      device(device),
      backend_name(std::move(backend_name)),
      p2p(static_cast<size_t>(world_size), nullptr) {}

void CommState::throw_if_failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  BATON_CHECK(failure_.empty(), "[comm] rank ", world_rank(),
              " cannot communicate after an earlier failure: ", failure_);
}

void CommState::wait_work(const compat::WorkPtr& work,
                          std::chrono::steady_clock::time_point deadline, const std::string& what,
                          int peer) {
  using namespace std::chrono;
  // c10d reads a zero timeout as "use the default", so never pass less than 1 ms.
  const auto left =
      std::max(milliseconds(1), duration_cast<milliseconds>(deadline - steady_clock::now()));
  try {
    work->wait(left);
  } catch (...) {
    fail(std::current_exception(), what, peer);
  }
}

void CommState::fail(std::exception_ptr error, const std::string& waited, int peer) {
  const std::string detail = first_line(error);
  const std::string text = lowercase(detail);
  const int who = world_rank();
  const std::string what =
      group_name.empty() ? waited : ::baton::detail::concat(waited, " (over the ", group_name, ")");
  std::string message;
  if (contains(text, "timed out") || contains(text, "timeout")) {
    // Every wait is bounded by the configured timeout, so that is what ran out.
    message = ::baton::detail::concat("[comm] rank ", who, " timed out after ",
                                      format_duration(timeout), " waiting for ", what);
  } else if (contains(text, "closed") || contains(text, "reset by peer") ||
             contains(text, "broken pipe") || contains(text, "connection refused")) {
    message = ::baton::detail::concat("[comm] rank ", who, ": ", peer_name(peer),
                                      " closed the connection while waiting for ", what);
  } else {
    message = ::baton::detail::concat("[comm] rank ", who, " failed while waiting for ", what, ": ",
                                      detail);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.empty()) failure_ = message;
  }
  throw Error(message);
}

void CommState::fail_timeout(const std::string& what, int peer) {
  fail(std::make_exception_ptr(std::runtime_error("timed out")), what, peer);
}

std::string format_duration(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 1000 == 0) return ::baton::detail::concat(ms / 1000, " s");
  if (ms > 1000) return ::baton::detail::concat(static_cast<double>(ms) / 1000.0, " s");
  return ::baton::detail::concat(ms, " ms");
}

std::string first_line(std::exception_ptr error) {
  std::string text;
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    text = e.what_without_backtrace();
  } catch (const std::exception& e) {
    text = e.what();
  } catch (...) {
    text = "unknown exception";
  }
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

}  // namespace baton::comm::detail
