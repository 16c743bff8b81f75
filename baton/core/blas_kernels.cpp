#include "baton/core/blas_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <strings.h>
#include <cstdlib>

namespace baton {

std::string advise_openblas_coretype(const BlasFacts& facts) {
  if (!facts.openblas || facts.coretype_set) return "";
  if (strcasecmp(facts.core.c_str(), "Prescott") != 0) return "";
  if (facts.avx512) return "SkylakeX";
  if (facts.avx2_fma) return "Haswell";
  return "";
}

BlasFacts blas_facts() {
  BlasFacts facts;
  using Corename = char* (*)();
  // OpenBLAS's own entry point, in the global scope when LibTorch linked it.
  if (auto corename = reinterpret_cast<Corename>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) {
    facts.openblas = true;
    if (const char* name = corename()) facts.core = name;
  }
  facts.coretype_set = std::getenv("OPENBLAS_CORETYPE") != nullptr;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  facts.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512cd");
  facts.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return facts;
}

void reexec_for_openblas_kernels(char** argv) {
  const std::string core = advise_openblas_coretype(blas_facts());
  if (core.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // The exec failed: go on here with the kernels OpenBLAS chose, and keep the
  // variable from reaching children as if it had been the user's.
  unsetenv("OPENBLAS_CORETYPE");
}

std::string blas_kernels() {
  const BlasFacts facts = blas_facts();
  return facts.openblas ? "OpenBLAS " + facts.core + " kernels" : "";
}

std::string openblas_kernels_warning() {
  const BlasFacts facts = blas_facts();
  const std::string core = advise_openblas_coretype(facts);
  if (core.empty()) return "";
  return "baton: warning: OpenBLAS runs its generic " + facts.core +
         " kernels on this CPU, which has " + (facts.avx512 ? "AVX-512" : "AVX2") +
         ": matrix products run about 3-4x slower; set OPENBLAS_CORETYPE=" + core +
         " before the program starts, or call baton::reexec_for_openblas_kernels(argv) first in "
         "main()";
}

}  // namespace baton
