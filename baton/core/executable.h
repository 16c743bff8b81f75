// The path of the running program, whatever argv[0] says.
#pragma once

#include <string>

namespace baton {

// The running program's path (/proc/self/exe). Throws baton::Error starting
// with `where` ("[launch]") when it cannot be read.
std::string this_executable(const std::string& where);

}  // namespace baton
