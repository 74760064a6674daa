// b[i] = a[i] + 1 for i < n. Arguments: a, b (tensors), n (int32); launch: blockIdx.x, threadIdx.x.
struct Params {
    n: i32,
    packGridDimX: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(64)
fn add_one(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    if (i < params.n) {
        b[i] = a[i] + 1.0;
    }
}
