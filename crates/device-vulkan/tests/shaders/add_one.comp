// b[i] = a[i] + 1 for i < n. Kernel `add_one(a: handle, b: handle, n: int32)`, launched with
// blockIdx.x and threadIdx.x (64).
#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) writeonly buffer B { float b[]; };
layout(push_constant) uniform Params { int n; } params;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < uint(params.n)) {
        b[i] = a[i] + 1.0;
    }
}
