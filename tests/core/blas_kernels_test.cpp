// OpenBLAS's kernels (core/blas_kernels.h): the advice follows OpenBLAS's own
// fallback (its generic Prescott kernels) and the CPU's features, and never
// overrides the user's OPENBLAS_CORETYPE. This binary links no BLAS, so its
// own facts find no OpenBLAS and advise nothing (tests/cli/train_blas_kernels.sh
// checks the CLI on LibTorch's).
#include "baton/core/blas_kernels.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

BlasFacts prescott() {
  BlasFacts f;
  f.openblas = true;
  f.core = "Prescott";
  f.avx512 = true;
  f.avx2_fma = true;
  return f;
}

TEST(BlasKernels, AdvisesTheWidestKernelsTheCpuRunsWhereOpenBlasFellBack) {
  EXPECT_EQ(advise_openblas_coretype(prescott()), "SkylakeX");
  BlasFacts avx2 = prescott();
  avx2.avx512 = false;
  EXPECT_EQ(advise_openblas_coretype(avx2), "Haswell");
  BlasFacts lower = prescott();
  lower.core = "prescott";
  EXPECT_EQ(advise_openblas_coretype(lower), "SkylakeX");
}

TEST(BlasKernels, AdvisesNothingOtherwise) {
  BlasFacts none = prescott();
  none.avx512 = none.avx2_fma = false;
  EXPECT_EQ(advise_openblas_coretype(none), "");  // Prescott is what this CPU runs
  BlasFacts chosen = prescott();
  chosen.core = "Cooperlake";
  EXPECT_EQ(advise_openblas_coretype(chosen), "");  // OpenBLAS knew the CPU
  BlasFacts users = prescott();
  users.coretype_set = true;
  EXPECT_EQ(advise_openblas_coretype(users), "");  // the user's choice stands
  BlasFacts mkl = prescott();
  mkl.openblas = false;
  EXPECT_EQ(advise_openblas_coretype(mkl), "");
}

TEST(BlasKernels, FindNoOpenBlasInABinaryWithoutOne) {
  const BlasFacts facts = blas_facts();
  EXPECT_FALSE(facts.openblas);
  EXPECT_EQ(blas_kernels(), "");
  EXPECT_EQ(openblas_kernels_warning(), "");
}

}  // namespace
}  // namespace baton
