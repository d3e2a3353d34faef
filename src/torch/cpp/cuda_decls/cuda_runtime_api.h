// The few CUDA runtime declarations that libtorch's c10/cuda headers name, so that
// cuda_trace.cpp can include c10/cuda/CUDACachingAllocator.h (for the allocator's class, whose
// virtual attachAllocatorTraceTracker it calls) on a machine without the CUDA toolkit, as CI is.
// Nothing here is defined or called: cuda_trace.cpp reaches the allocator through libc10_cuda,
// loaded by the script's torch, or not at all. Types only need their kind (a pointer, an enum).
#pragma once
#include <cstddef>

#define CUDART_VERSION 13000
#define CUDA_VERSION 13000

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;

enum cudaError { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorNotReady = 600 };
typedef enum cudaError cudaError_t;
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

// Named by torch 2.14+'s c10/cuda/CUDAGraphsC10Utils.h (CUDA 13's capture info, graph user objects).
typedef struct CUgraphNode_st* cudaGraphNode_t;
typedef struct CUuserObject_st* cudaUserObject_t;
typedef void (*cudaHostFn_t)(void* userData);
struct cudaGraphEdgeData_st;
typedef struct cudaGraphEdgeData_st cudaGraphEdgeData;
enum cudaUserObjectFlags { cudaUserObjectNoDestructorSync = 1 };
enum cudaUserObjectRetainFlags { cudaGraphUserObjectMove = 1 };

extern "C" {
// Defaults as CUDA's own header gives them in C++ (`__dv(0)`): torch 2.13 passes three
// arguments, 2.14+ all seven.
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus* status,
                                     unsigned long long* id = nullptr, cudaGraph_t* graph = nullptr,
                                     const cudaGraphNode_t** dependencies = nullptr,
                                     const cudaGraphEdgeData** edge_data = nullptr,
                                     size_t* count = nullptr);
cudaError_t cudaUserObjectCreate(cudaUserObject_t* object, void* ptr, cudaHostFn_t destroy,
                                 unsigned int initial_refcount, unsigned int flags);
cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object,
                                      unsigned int count, unsigned int flags);
cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count);
cudaError_t cudaGetLastError(void);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status);
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest);
}
