// b[i] = a[i] * scale + shift for i < n, with the scalars in a uniform buffer (the shader flag
// kUseUBO), one 8-byte slot each. Kernel `scale_ubo(a: handle, b: handle, n: int32,
// scale: float32, shift: int32)`, launched with blockIdx.x and threadIdx.x (64).
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) writeonly buffer B { float b[]; };
layout(std140, set = 0, binding = 2) uniform Params {
    layout(offset = 0) int n;
    layout(offset = 8) float scale;
    layout(offset = 16) int shift;
} params;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < uint(params.n)) {
        b[i] = a[i] * params.scale + float(params.shift);
    }
}
