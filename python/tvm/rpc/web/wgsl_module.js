// Kernel modules of kind `webgpu` in the browser: WGSL shaders with the launch metadata of
// their kernels, in the two forms the native WebGPU backend loads (crates/device-webgpu): a
// `.wgsl` file with its `.tvm_meta.json`, or the serialized module (`[fmt "webgpu"][fmap][smap]`).
//
// The launch convention is the native backend's: tensors first, bound as storage buffers at
// @group(0) @binding(0..n-1); then scalars (int32, uint32, float32), 4 bytes each in a uniform
// params block at @binding(n) followed by `packGridDimX: u32` and padded to 16 bytes; then one
// int per launch tag. The grid is blockIdx.x/y; a grid x past the device's limit folds into z.

import { RPCFault, Reader, tensorBytes, text } from "./rpc_wire.js";
import { captured } from "./webgpu_device.js";

/** Prefix of the launch tag TVM's WGSL code generator adds to say which buffers are written. */
const WRITE_ACCESS_TAG = "paramWriteAccess:";
const SCALAR_TYPES = new Set(["int32", "uint32", "float32"]);
/** The largest grid or block extent a launch value may give. */
const MAX_EXTENT = 2 ** 32 - 1;
const DTYPE_CODES = { 0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat" };

/** A dtype of the serialized form (code, bits, lanes) as its name. */
function dtypeName({ code, bits, lanes }) {
  if (code === 3) return "handle";
  const base = `${DTYPE_CODES[code] || `code${code}_`}${bits}`;
  return lanes === 1 ? base : `${base}x${lanes}`;
}

/** The kernels of a `.tvm_meta.json` text: name to `{name, argTypes, tags}`. */
export function functionsFromJSON(source, what) {
  let value;
  try {
    value = JSON.parse(source);
  } catch (err) {
    throw new RPCFault("ValueError", `${what} is not JSON: ${err.message}`);
  }
  const kernels = value && value.func_info;
  if (!kernels || typeof kernels !== "object") {
    throw new RPCFault("ValueError", `${what} has no "func_info" object`);
  }
  const functions = new Map();
  for (const [name, info] of Object.entries(kernels)) {
    const argTypes = info && info.arg_types;
    const tags = (info && info.launch_param_tags) || [];
    const strings = (list) => Array.isArray(list) && list.every((item) => typeof item === "string");
    if (!strings(argTypes) || !strings(tags)) {
      throw new RPCFault(
        "ValueError",
        `${what}: kernel \`${name}\` needs "arg_types" and "launch_param_tags" lists of strings`,
      );
    }
    functions.set(name, { name, argTypes, tags });
  }
  return functions;
}

/** The kernels and WGSL sources of a serialized `webgpu` module. */
export function parseSerializedModule(bytes) {
  const input = new Reader(bytes, "webgpu module");
  const string = (what) => text(input.bytes(what));
  const count = (what, minBytes) => {
    const n = input.u64(what);
    if (n * BigInt(minBytes) > BigInt(input.remaining())) {
      throw input.fail(`a count of ${n} ${what} does not fit in the ${input.remaining()} bytes left`);
    }
    return Number(n);
  };
  const format = string("module format");
  if (format !== "webgpu") {
    throw new RPCFault("ValueError", `module bytes have format '${format}', expected 'webgpu'`);
  }
  const functions = new Map();
  for (let i = count("kernels", 16); i > 0; i--) {
    const key = string("kernel name");
    const name = string("kernel name");
    const argTypes = [];
    for (let j = count("argument types", 4); j > 0; j--) {
      const word = input.u32("argument type");
      argTypes.push(dtypeName({ code: word & 0xff, bits: (word >> 8) & 0xff, lanes: word >>> 16 }));
    }
    const tags = [];
    for (let j = count("launch tags", 8); j > 0; j--) tags.push(string("launch tag"));
    for (let j = count("argument tags", 4); j > 0; j--) input.i32("argument tag");
    functions.set(key, { name, argTypes, tags });
  }
  const sources = new Map();
  for (let i = count("shaders", 16); i > 0; i--) {
    const name = string("kernel name");
    sources.set(name, string("WGSL source"));
  }
  input.finish("webgpu module");
  return { functions, sources };
}

/** The storage bindings of group 0 a shader declares: binding number to whether read-only. */
function declaredBindings(source) {
  const storage = new Map();
  const uniform = new Set();
  const pattern =
    /@(?:group\((\d+)\)\s*@binding\((\d+)\)|binding\((\d+)\)\s*@group\((\d+)\))\s*var\s*<\s*(storage|uniform)\s*(?:,\s*(read_write|read))?\s*>/g;
  for (const m of source.matchAll(pattern)) {
    const group = Number(m[1] ?? m[4]);
    const binding = Number(m[2] ?? m[3]);
    if (group !== 0) continue;
    if (m[5] === "uniform") uniform.add(binding);
    else storage.set(binding, m[6] !== "read_write");
  }
  return { storage, uniform };
}

/** `@workgroup_size(...)` of compute entry point `name`, when its values are literals. */
function workgroupSize(source, name) {
  const pattern = /((?:@[\w]+(?:\([^)]*\))?\s*)+)fn\s+(\w+)\s*\(/g;
  for (const m of source.matchAll(pattern)) {
    if (m[2] !== name || !/@compute\b/.test(m[1])) continue;
    const size = /@workgroup_size\(([^)]*)\)/.exec(m[1]);
    if (!size) return null;
    const dims = size[1].split(",").map((d) => d.trim()).filter((d) => d);
    if (!dims.every((d) => /^\d+[iu]?$/.test(d))) return null;
    const values = dims.map((d) => parseInt(d, 10));
    while (values.length < 3) values.push(1);
    return values;
  }
  return null;
}

/** Compiles WGSL `source`; its errors (with line and column) are a ValueError naming `what`. */
async function compileShader(gpu, source, what) {
  const module = gpu.device.createShaderModule({ code: source, label: what });
  const info = await module.getCompilationInfo();
  const errors = info.messages.filter((m) => m.type === "error");
  if (errors.length) {
    const lines = errors.map((m) => `${what}:${m.lineNum}:${m.linePos}: ${m.message}`);
    throw new RPCFault("ValueError", `${what} does not compile as WGSL:\n${lines.join("\n")}`);
  }
  return module;
}

/** A kernel: its pipeline and what its launches reuse. */
class Kernel {
  constructor(gpu, info, source, shader) {
    this.gpu = gpu;
    this.name = info.name;
    this.tags = info.tags.filter((t) => !t.startsWith(WRITE_ACCESS_TAG));
    const fail = (message) => new RPCFault("ValueError", `kernel \`${this.name}\`: ${message}`);
    this.fail = fail;
    this.numBuffers = 0;
    this.scalars = [];
    info.argTypes.forEach((type, index) => {
      if (type === "handle") {
        if (this.scalars.length) throw fail(`argument ${index} is a tensor after a scalar; tensors come first`);
        this.numBuffers += 1;
      } else if (SCALAR_TYPES.has(type)) {
        this.scalars.push(type);
      } else {
        throw new RPCFault(
          "TypeError",
          `kernel \`${this.name}\`: argument ${index} has type ${type}; WGSL kernels take int32, uint32 and float32 scalars`,
        );
      }
    });
    for (const tag of this.tags) {
      if (tag === "blockIdx.z") throw fail("blockIdx.z is reserved on WebGPU (a large grid x folds into z)");
      if (!/^(blockIdx\.[xy]|threadIdx\.[xyz])$/.test(tag)) throw fail(`unknown launch tag ${tag}`);
    }
    this.shader = shader;
    this.workgroupSize = workgroupSize(source, this.name);
    this.bindings = declaredBindings(source);
    this.usesParams = this.bindings.uniform.has(this.numBuffers);
    this.paramsSize = Math.ceil(((this.scalars.length + 1) * 4) / 16) * 16;
    this.lastBind = null;
  }

  /** The pipeline, with an explicit layout from the metadata; a shader that does not match it
   * (another binding, another access) is a ValueError with the browser's message. */
  async build() {
    const device = this.gpu.device;
    const entries = [];
    for (let binding = 0; binding < this.numBuffers; binding++) {
      const readOnly = this.bindings.storage.get(binding) === true;
      entries.push({
        binding,
        visibility: GPUShaderStage.COMPUTE,
        buffer: { type: readOnly ? "read-only-storage" : "storage" },
      });
    }
    if (this.usesParams) {
      entries.push({ binding: this.numBuffers, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform" } });
      this.params = device.createBuffer({
        size: this.paramsSize,
        usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
      });
    }
    const what = `kernel \`${this.name}\``;
    this.layout = await captured(device, what, () => device.createBindGroupLayout({ entries }));
    const layout = device.createPipelineLayout({ bindGroupLayouts: [this.layout] });
    try {
      this.pipeline = await device.createComputePipelineAsync({
        layout,
        compute: { module: this.shader, entryPoint: this.name },
      });
    } catch (err) {
      this.gpu.checkAlive();
      throw this.fail(
        `the shader does not match the metadata (${this.numBuffers} tensors at bindings ` +
          `0..${this.numBuffers - 1}, the params uniform at ${this.numBuffers}): ${err.message}`,
      );
    }
  }

  /**
   * Launches the kernel with the call's arguments; `timestampWrites` for a timed pass. A
   * `checked` launch waits for WebGPU's verdict on it; the time evaluator's repeated launches,
   * the same as one checked before them, do not.
   */
  async launch(args, timestampWrites, checked = true) {
    const gpu = this.gpu;
    gpu.checkAlive();
    const expected = this.numBuffers + this.scalars.length + this.tags.length;
    if (args.length !== expected) {
      throw new RPCFault(
        "TypeError",
        `kernel \`${this.name}\` takes ${expected} arguments (${this.numBuffers} tensors, ` +
          `${this.scalars.length} scalars, ${this.tags.length} launch values), got ${args.length}`,
      );
    }
    const bound = [];
    for (let i = 0; i < this.numBuffers; i++) {
      if (args[i].kind !== "tensor") {
        throw new RPCFault("TypeError", `kernel \`${this.name}\`: argument ${i} must be a tensor, got ${args[i].kind}`);
      }
      if (tensorBytes(args[i].value) === 0n) throw this.fail(`argument ${i} is empty (a tensor of 0 bytes)`);
      bound.push(gpu.binding(args[i].value));
    }
    const grid = [1, 1];
    const block = [null, null, null];
    this.tags.forEach((tag, t) => {
      const value = integer(args[expected - this.tags.length + t], `${this.name}: launch value ${tag}`);
      if (value < 1 || value > MAX_EXTENT) throw this.fail(`${tag}=${value} is outside 1..=${MAX_EXTENT}`);
      const axis = "xyz".indexOf(tag[tag.length - 1]);
      if (tag.startsWith("blockIdx")) grid[axis] = value;
      else block[axis] = value;
    });
    if (this.workgroupSize) {
      block.forEach((value, axis) => {
        if (value !== null && value !== this.workgroupSize[axis]) {
          throw this.fail(
            `threadIdx.${"xyz"[axis]}=${value} does not match the shader's @workgroup_size ` +
              `[${this.workgroupSize.join(", ")}]`,
          );
        }
      });
    }
    const max = gpu.device.limits.maxComputeWorkgroupsPerDimension;
    if (grid[1] > max) throw this.fail(`blockIdx.y=${grid[1]} is outside the device's grid range 1..=${max}`);
    let [x, z] = [grid[0], 1];
    while (x > max) {
      x = Math.ceil(x / 2);
      z *= 2;
    }
    if (z > max) {
      throw this.fail(`blockIdx.x=${grid[0]} is past what the device dispatches, even folded into z (${max} x ${max})`);
    }
    const params = this.usesParams ? this.paramsBlock(args, grid[0]) : null;
    const reused = this.reusableBindGroup(bound);
    const submit = (bindGroup) => {
      if (params) gpu.device.queue.writeBuffer(this.params, 0, params);
      const encoder = gpu.device.createCommandEncoder();
      const pass = encoder.beginComputePass(timestampWrites ? { timestampWrites } : {});
      pass.setPipeline(this.pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(x, grid[1], z);
      pass.end();
      gpu.device.queue.submit([encoder.finish()]);
    };
    if (reused || !checked) {
      submit(reused || this.newBindGroup(bound));
      return;
    }
    // The first launch with these bindings waits for WebGPU's verdict (it reports what it
    // refuses, such as a buffer bound twice and written, as an error of the scope); launches
    // that repeat a verified one do not.
    this.lastBind = null;
    const group = await captured(gpu.device, `kernel \`${this.name}\``, () => {
      const created = this.newBindGroup(bound);
      submit(created);
      return created;
    });
    this.lastBind = { bound, group };
  }

  /** The params block: the scalars, 4 bytes each, then packGridDimX, padded to 16 bytes. */
  paramsBlock(args, gridX) {
    const block = new DataView(new ArrayBuffer(this.paramsSize));
    this.scalars.forEach((type, i) => {
      const index = this.numBuffers + i;
      const arg = args[index];
      const what = `kernel \`${this.name}\`: argument ${index} (${type})`;
      if (type === "float32") {
        if (arg.kind !== "float" && arg.kind !== "int") throw new RPCFault("TypeError", `${what} must be a number, got ${arg.kind}`);
        block.setFloat32(i * 4, Number(arg.value), true);
      } else {
        const value = integer(arg, what);
        const [low, high] = type === "int32" ? [-(2 ** 31), 2 ** 31 - 1] : [0, 2 ** 32 - 1];
        if (value < low || value > high) throw new RPCFault("OverflowError", `${what} = ${value} does not fit in ${type}`);
        if (type === "int32") block.setInt32(i * 4, value, true);
        else block.setUint32(i * 4, value, true);
      }
    });
    block.setUint32(this.scalars.length * 4, gridX, true);
    return new Uint8Array(block.buffer);
  }

  /** The bind group of the last verified launch, if it had these bindings. */
  reusableBindGroup(bound) {
    const last = this.lastBind;
    const same =
      last &&
      last.bound.length === bound.length &&
      last.bound.every((b, i) => b.buffer === bound[i].buffer && b.offset === bound[i].offset && b.size === bound[i].size);
    return same ? last.group : null;
  }

  /** A bind group of these tensor bindings (and the params block). */
  newBindGroup(bound) {
    const entries = bound.map((b, binding) => ({
      binding,
      resource: { buffer: b.buffer, offset: b.offset, size: b.size },
    }));
    if (this.usesParams) entries.push({ binding: this.numBuffers, resource: { buffer: this.params } });
    return this.gpu.device.createBindGroup({ layout: this.layout, entries });
  }
}

/** An integer argument as a Number; a TypeError naming `what` otherwise. */
function integer(arg, what) {
  if (!arg || (arg.kind !== "int" && arg.kind !== "bool")) {
    throw new RPCFault("TypeError", `${what} must be an int, got ${arg ? arg.kind : "nothing"}`);
  }
  return Number(arg.value);
}

/** A loaded `webgpu` module: its kernels by name. */
export class WGSLModule {
  constructor(kernels) {
    this.kernels = kernels;
  }

  /** Builds the kernels of `functions`, each from the WGSL `sourceOf(name)` gives it. */
  static async build(gpu, functions, sourceOf, what) {
    const shaders = new Map();
    const kernels = new Map();
    for (const [name, info] of functions) {
      const source = sourceOf(name);
      if (source === undefined) {
        throw new RPCFault("ValueError", `${what}: kernel \`${name}\` has metadata but no WGSL source`);
      }
      if (!shaders.has(source)) shaders.set(source, await compileShader(gpu, source, what));
      const kernel = new Kernel(gpu, info, source, shaders.get(source));
      await kernel.build();
      kernels.set(name, kernel);
    }
    return new WGSLModule(kernels);
  }

  /** The kernel `name`, or undefined. */
  kernel(name) {
    return this.kernels.get(name);
  }
}
