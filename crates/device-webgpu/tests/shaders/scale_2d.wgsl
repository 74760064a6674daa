// dst[r, c] = alpha * src[r * stride + c] over rows x cols. Arguments: src, dst (tensors), rows,
// cols, stride (int32), alpha (float32); launch: blockIdx.x, blockIdx.y, threadIdx.x, threadIdx.y.
struct Params {
    rows: i32,
    cols: i32,
    stride: i32,
    alpha: f32,
    packGridDimX: u32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(8, 8)
fn scale_2d(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = i32(gid.x);
    let r = i32(gid.y);
    if (r < params.rows && c < params.cols) {
        dst[r * params.cols + c] = params.alpha * src[r * params.stride + c];
    }
}
