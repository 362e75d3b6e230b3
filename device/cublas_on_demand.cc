// cuBLAS loaded the first time a cuBLAS function is called, not when moelab starts: linked
// normally, libcublas and libcublasLt (about 0.1 s and 225 MB of relocations) were loaded by
// every command, `--help` included, though only --device gpu runs and GPU profiles use them.
//
// moelab is not linked against libcublas. This file defines the cuBLAS functions moelab calls,
// with the declarations of <cublas_v2.h> (so the compiler checks every signature), and each one
// forwards to the real function, found with dlsym in libcublas.so.<major of the headers built
// against>, opened with dlopen on the first call (the loader's search path first, then the
// toolkit's folder at build time). When the library cannot be opened every function returns
// CUBLAS_STATUS_NOT_INITIALIZED and cublasGetStatusString says why (the dlopen error), which
// MOELAB_CUBLAS_CHECK puts in its GpuError. A cuBLAS function moelab starts calling must be added
// here: the link fails without it.
#include <dlfcn.h>

#include <cublas_v2.h>

#include <string>

#ifndef MOELAB_CUBLAS_LIBRARY_DIR
#error "MOELAB_CUBLAS_LIBRARY_DIR (the toolkit's library folder) is set by device/CMakeLists.txt"
#endif

namespace {

struct CublasLibrary {
  void* handle = nullptr;
  std::string why_not;  // the dlopen error when handle is null
};

const CublasLibrary& Cublas() {
  static const CublasLibrary library = [] {
    CublasLibrary opened;
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    for (const std::string& path : {name, std::string(MOELAB_CUBLAS_LIBRARY_DIR) + "/" + name}) {
      opened.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (opened.handle) return opened;
      const char* error = dlerror();
      opened.why_not = "cuBLAS could not be loaded: " + std::string(error ? error : path);
    }
    return opened;
  }();
  return library;
}

// The library's `symbol` as a pointer of the declared function's type, or null.
template <typename Function>
Function* Resolve(const char* symbol) {
  const CublasLibrary& library = Cublas();
  return library.handle ? reinterpret_cast<Function*>(dlsym(library.handle, symbol)) : nullptr;
}

}  // namespace

// <cublas_v2.h> maps cublasCreate, cublasDestroy and cublasSetStream to their _v2 symbols.
cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  static auto* const real = Resolve<decltype(cublasCreate_v2)>("cublasCreate_v2");
  return real ? real(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  static auto* const real = Resolve<decltype(cublasDestroy_v2)>("cublasDestroy_v2");
  return real ? real(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static auto* const real = Resolve<decltype(cublasSetStream_v2)>("cublasSetStream_v2");
  return real ? real(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int* value) {
  static auto* const real = Resolve<decltype(cublasGetProperty)>("cublasGetProperty");
  return real ? real(type, value) : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static auto* const real = Resolve<decltype(cublasGetStatusString)>("cublasGetStatusString");
  if (real) return real(status);
  return Cublas().handle ? "cuBLAS status (the library has no cublasGetStatusString)"
                         : Cublas().why_not.c_str();
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const void* alpha, const void* A, cudaDataType Atype,
                                         int lda, const void* B, cudaDataType Btype, int ldb,
                                         const void* beta, void* C, cudaDataType Ctype, int ldc,
                                         cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  // <cublas_api.h> also has an inline overload taking a cudaDataType compute type: name the one.
  using GemmEx =
      cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                     const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                     const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  static auto* const real = Resolve<GemmEx>("cublasGemmEx");
  return real ? real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,
                     Ctype, ldc, computeType, algo)
              : CUBLAS_STATUS_NOT_INITIALIZED;
}
