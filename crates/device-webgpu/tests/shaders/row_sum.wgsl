// out[r] = the sum of row r of a (rows x cols, row-major): one work group per row, whose 64
// invocations each sum a strided part of the row, then reduce their sums in workgroup memory.
// Arguments: a, out (float32 tensors), cols (int32); launch: blockIdx.x, threadIdx.x.
struct Params {
    cols: i32,
    packGridDimX: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn row_sum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = i32(wid.x);
    var acc = 0.0;
    for (var c = i32(lid); c < params.cols; c += 64) {
        acc += a[row * params.cols + c];
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        out[row] = partial[0];
    }
}
