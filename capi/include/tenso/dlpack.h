/**
 * @file tenso/dlpack.h
 * @brief the DLPack 1.x types tenso exports tensors as.
 *
 * Declared here from the published DLPack specification (v1.1) because the versioned structs
 * are newer than what most systems ship. If the application already included a DLPack >= 1.0
 * header (which defines DLPACK_MAJOR_VERSION), that header's identical definitions are used.
 * Including a pre-1.0 dlpack.h together with this one is not supported.
 */
#ifndef TENSO_DLPACK_H
#define TENSO_DLPACK_H

#include <stdint.h>

#ifndef DLPACK_MAJOR_VERSION
#define DLPACK_MAJOR_VERSION 1 /**< the DLPack major version these structs follow */
#define DLPACK_MINOR_VERSION 1 /**< the DLPack minor version these structs follow */

#ifdef __cplusplus
extern "C" {
#endif

/** A DLPack ABI version, as DLManagedTensorVersioned carries it. */
typedef struct {
    uint32_t major; /**< incompatible changes */
    uint32_t minor; /**< compatible additions */
} DLPackVersion;

/** Where a tensor's memory lives. */
typedef enum {
    kDLCPU = 1,          /**< host memory */
    kDLCUDA = 2,         /**< CUDA device memory */
    kDLCUDAHost = 3,     /**< pinned host memory (cudaMallocHost) */
    kDLOpenCL = 4,       /**< OpenCL */
    kDLVulkan = 7,       /**< Vulkan */
    kDLMetal = 8,        /**< Metal */
    kDLVPI = 9,          /**< Verilog simulator buffers */
    kDLROCM = 10,        /**< ROCm device memory */
    kDLROCMHost = 11,    /**< pinned ROCm host memory */
    kDLExtDev = 12,      /**< reserved for extension devices */
    kDLCUDAManaged = 13, /**< CUDA managed (unified) memory */
    kDLOneAPI = 14,      /**< oneAPI unified shared memory */
    kDLWebGPU = 15,      /**< WebGPU */
    kDLHexagon = 16,     /**< Qualcomm Hexagon DSP */
    kDLMAIA = 17         /**< Microsoft MAIA */
} DLDeviceType;

/** A device: its type and ordinal. */
typedef struct {
    DLDeviceType device_type; /**< the kind of device */
    int32_t device_id;        /**< the device ordinal; 0 for the host */
} DLDevice;

/** The type family of DLDataType.code. */
typedef enum {
    kDLInt = 0U,          /**< signed integers */
    kDLUInt = 1U,         /**< unsigned integers */
    kDLFloat = 2U,        /**< IEEE floating point */
    kDLOpaqueHandle = 3U, /**< opaque handles */
    kDLBfloat = 4U,       /**< bfloat16 */
    kDLComplex = 5U,      /**< complex numbers, (re, im) pairs */
    kDLBool = 6U          /**< booleans */
} DLDataTypeCode;

/** An element type: family, bits and vector lanes (bool is kDLBool, 8 bits). */
typedef struct {
    uint8_t code;   /**< a DLDataTypeCode */
    uint8_t bits;   /**< bits per lane */
    uint16_t lanes; /**< 1 for scalars */
} DLDataType;

/** A tensor: memory, device, shape and element type (a borrowed description). */
typedef struct {
    void *data;           /**< the memory, aligned as the producer allocated it */
    DLDevice device;      /**< where data lives */
    int32_t ndim;         /**< dimensions */
    DLDataType dtype;     /**< the element type */
    int64_t *shape;       /**< ndim extents */
    int64_t *strides;     /**< ndim strides in elements; tenso always gives compact row-major ones */
    uint64_t byte_offset; /**< where the first element is, from data */
} DLTensor;

/** The pre-1.0 managed tensor, kept for consumers that only take the legacy capsule. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor; /**< the tensor */
    void *manager_ctx;  /**< the producer's state, for deleter */
    /** Called by the consumer once it no longer uses the tensor (NULL: nothing to release). */
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/** DLManagedTensorVersioned.flags: the consumer must not write to the memory. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/** DLManagedTensorVersioned.flags: the producer made a copy for this export. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/** DLManagedTensorVersioned.flags: sub-byte elements are padded to whole bytes. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/** The DLPack >= 1.0 managed tensor: a DLTensor, its version, flags and deleter. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version; /**< the DLPack version the producer follows */
    void *manager_ctx;     /**< the producer's state, for deleter */
    /** Called by the consumer once it no longer uses the tensor (NULL: nothing to release). */
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;     /**< DLPACK_FLAG_BITMASK_* bits */
    DLTensor dl_tensor; /**< the tensor */
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif

#endif /* DLPACK_MAJOR_VERSION */
#endif /* TENSO_DLPACK_H */
