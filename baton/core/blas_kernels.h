// Which kernels OpenBLAS runs. Debian's LibTorch does its matrix products in
// OpenBLAS, which picks its kernels from the CPU's model number when it is
// loaded. OpenBLAS 0.3.21 (Debian 12) does not know the newest Xeons (Sapphire
// and Emerald Rapids: family 6, models 143 and 207) and falls back to its
// generic "Prescott" (SSE3) kernels there: a single-thread sgemm of 64 x 1024 x
// 2816 runs at 22-30 GFLOP/s against 114 with OPENBLAS_CORETYPE=SkylakeX, and
// baton's llama step takes 3.4-4.3x as long (bench/RESULTS.md, "OpenBLAS's
// kernels"). The choice is made before main(), so the remedy is the variable
// in the environment before the process starts: the CLI re-executes itself
// with it (reexec_for_openblas_kernels), and a library user can do the same.
#pragma once

#include <string>

namespace baton {

// What advise_openblas_coretype() reads.
struct BlasFacts {
  bool openblas = false;      // OpenBLAS is loaded in this process
  std::string core;           // the kernels it runs (openblas_get_corename())
  bool coretype_set = false;  // OPENBLAS_CORETYPE is in the environment
  bool avx512 = false;        // AVX-512 F, BW, DQ, VL and CD
  bool avx2_fma = false;      // AVX2 and FMA
};

// The OPENBLAS_CORETYPE to run with: "SkylakeX" on a CPU with AVX-512 and
// "Haswell" on one with AVX2 and FMA where OpenBLAS fell back to its Prescott
// kernels and the user set no OPENBLAS_CORETYPE; "" otherwise (no OpenBLAS,
// kernels it chose itself, or the user's choice).
std::string advise_openblas_coretype(const BlasFacts& facts);

// This process's facts: OpenBLAS found by its symbol (none in an MKL build),
// the CPU's features from CPUID.
BlasFacts blas_facts();

// When advise_openblas_coretype(blas_facts()) is not empty: sets
// OPENBLAS_CORETYPE to it and executes this program again (/proc/self/exe)
// with `argv`, so nothing after the call runs in this process. Returns
// (doing nothing more) when there is no advice or the exec fails. Call it
// first in main(), before any thread or file is opened.
void reexec_for_openblas_kernels(char** argv);

// "OpenBLAS <core> kernels" where OpenBLAS is loaded (what `baton train`
// prints in its first line); "" otherwise.
std::string blas_kernels();

// One line for stderr when the advice is not empty (what runs slow and the
// variable that fixes it); "" otherwise.
std::string openblas_kernels_warning();

}  // namespace baton
