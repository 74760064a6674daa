// Keeps the device busy: x[i] goes through `steps` steps of a linear congruential generator.
// Arguments: x (uint32 tensor), n, steps (int32); launch: blockIdx.x, threadIdx.x.
struct Params {
    n: i32,
    steps: i32,
    packGridDimX: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(64)
fn busy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = i32(gid.x);
    if (i >= params.n) {
        return;
    }
    var v = x[i];
    for (var k = 0; k < params.steps; k++) {
        v = v * 1664525u + 1013904223u;
    }
    x[i] = v;
}
