/* Included by a kernel body (*.inc) to name its functions for the type being built: the
 * includer defines REAL (float or double) and SFX (f32 or f64) first. GEMM is the matching
 * BLAS routine. The f64 build exists for the finite-difference gradient tests. */
#define TR_CAT_(a, b) a##_##b
#define TR_CAT(a, b) TR_CAT_(a, b)
#define FN(name) TR_CAT(name, SFX)
