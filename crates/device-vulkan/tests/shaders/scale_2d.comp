// out[r][c] = alpha * in[r * in_stride + c] for a rows x cols matrix read with a row stride.
// Kernel `scale_2d(in: handle, out: handle, rows: int32, cols: int32, in_stride: int64,
// alpha: float32)`, launched with blockIdx.x, blockIdx.y, threadIdx.x (8), threadIdx.y (8).
// Each scalar takes 8 bytes of push constants (ArgUnion64).
#version 450
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 8, local_size_y = 8) in;
layout(set = 0, binding = 0) readonly buffer In { float src[]; };
layout(set = 0, binding = 1) writeonly buffer Out { float dst[]; };
layout(push_constant) uniform Params {
    layout(offset = 0) int rows;
    layout(offset = 8) int cols;
    layout(offset = 16) int64_t in_stride;
    layout(offset = 24) float alpha;
} params;

void main() {
    uint c = gl_GlobalInvocationID.x;
    uint r = gl_GlobalInvocationID.y;
    if (r < uint(params.rows) && c < uint(params.cols)) {
        dst[r * uint(params.cols) + c] = params.alpha * src[uint(int64_t(r) * params.in_stride) + c];
    }
}
