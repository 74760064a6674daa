// The browser's WebGPU adapter as the page's one device, webgpu(0): attributes, allocations
// (one storage buffer each), copies in and out, synchronization, and the errors WebGPU reports
// (validation, out of memory, device lost) turned into RPC faults of the right kind.

import { RPCFault, tensorBytes } from "./rpc_wire.js";

/** DLPack's device type of WebGPU. */
export const KDL_WEBGPU = 15;
/** DLPack's device type of the CPU. */
export const KDL_CPU = 1;

/** Allocation handles are multiples of this: an address inside one names its allocation. */
const HANDLE_STRIDE = 1n << 32n;

/** Device attributes by their code (tvm/runtime/device_api.h's DeviceAttrKind). */
const Attr = Object.freeze({
  Exist: 0,
  MaxThreadsPerBlock: 1,
  WarpSize: 2,
  MaxSharedMemoryPerBlock: 3,
  DeviceName: 5,
  MaxThreadDimensions: 8,
  ApiVersion: 11,
  DriverVersion: 12,
});

const align4 = (n) => Math.ceil(n / 4) * 4;

/** A device's name for messages: `webgpu(0)`, `cpu(0)`, `device type 7 (id 0)`. */
export function deviceName(device) {
  const names = { [KDL_CPU]: "cpu", 2: "cuda", 4: "opencl", 7: "vulkan", 10: "rocm" };
  names[KDL_WEBGPU] = "webgpu";
  const name = names[device.type];
  return name ? `${name}(${device.id})` : `device type ${device.type} (id ${device.id})`;
}

/** Runs `work` (which may be async) inside validation and out-of-memory error scopes; an error
 * WebGPU reports there becomes an RPCFault naming `what`. */
export async function captured(device, what, work) {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  let result;
  let thrown = null;
  try {
    result = await work();
  } catch (err) {
    thrown = err;
  }
  const validation = await device.popErrorScope();
  const memory = await device.popErrorScope();
  if (thrown) throw thrown;
  if (memory) throw new RPCFault("MemoryError", `${what}: out of GPU memory: ${memory.message}`);
  if (validation) throw new RPCFault("ValueError", `${what}: ${validation.message}`);
  return result;
}

/** The page's WebGPU device. */
export class WebGPUDevice {
  constructor(adapter, device, info) {
    this.adapter = adapter;
    this.device = device;
    this.info = info;
    this.lost = null;
    this.allocations = new Map();
    this.nextHandle = HANDLE_STRIDE;
    this.timestamps = device.features.has("timestamp-query");
    device.lost.then((lost) => {
      this.lost = lost;
    });
  }

  /** Opens the browser's adapter (its largest buffers allowed, timestamps when offered). */
  static async open() {
    if (!globalThis.navigator || !navigator.gpu) {
      throw new RPCFault(
        "RuntimeError",
        "this browser has no WebGPU (navigator.gpu is undefined): use a browser with WebGPU " +
          "enabled (Chromium: --enable-unsafe-webgpu on Linux) on a page served over http://127.0.0.1 or https",
      );
    }
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) {
      throw new RPCFault("RuntimeError", "the browser offers no WebGPU adapter");
    }
    const features = ["timestamp-query", "shader-f16"].filter((f) => adapter.features.has(f));
    const limits = {};
    for (const name of ["maxBufferSize", "maxStorageBufferBindingSize"]) {
      limits[name] = adapter.limits[name];
    }
    const device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits: limits });
    const info = adapter.info || {};
    const name = [info.vendor, info.architecture, info.device, info.description]
      .filter((part) => part)
      .join(" ");
    return new WebGPUDevice(adapter, device, { ...info, name: name || "WebGPU adapter" });
  }

  /** Fails once the device is lost: every later request says so. */
  checkAlive() {
    if (this.lost) {
      throw new RPCFault(
        "RuntimeError",
        `the WebGPU device was lost (${this.lost.reason || "unknown reason"}): ${this.lost.message}`,
      );
    }
  }

  /** Fails unless `device` is this one. */
  check(device) {
    if (device.type !== KDL_WEBGPU || device.id !== 0) {
      throw new RPCFault(
        "ValueError",
        `the browser page has no device ${deviceName(device)}; it serves webgpu(0) (${this.info.name})`,
      );
    }
    this.checkAlive();
  }

  /** Attribute `code` of `device`: a number, a string, or null when WebGPU does not tell. */
  attribute(device, code) {
    if (code === Attr.Exist) {
      return device.type === KDL_WEBGPU && device.id === 0 && !this.lost ? 1 : 0;
    }
    this.check(device);
    const limits = this.device.limits;
    switch (code) {
      case Attr.MaxThreadsPerBlock:
        return limits.maxComputeInvocationsPerWorkgroup;
      case Attr.WarpSize:
        return this.info.subgroupMinSize || 1;
      case Attr.MaxSharedMemoryPerBlock:
        return limits.maxComputeWorkgroupStorageSize;
      case Attr.DeviceName:
        return this.info.name;
      case Attr.MaxThreadDimensions:
        return `[${limits.maxComputeWorkgroupSizeX}, ${limits.maxComputeWorkgroupSizeY}, ${limits.maxComputeWorkgroupSizeZ}]`;
      case Attr.ApiVersion:
        return "browser";
      case Attr.DriverVersion:
        return navigator.userAgent;
      default:
        return null;
    }
  }

  /** A new storage buffer of `nbytes`; its handle. */
  async alloc(device, nbytes) {
    this.check(device);
    const max = this.device.limits.maxBufferSize;
    if (nbytes < 0n) throw new RPCFault("ValueError", `cannot allocate ${nbytes} bytes: the size is negative`);
    if (nbytes > BigInt(max)) {
      throw new RPCFault(
        "ValueError",
        `cannot allocate ${nbytes} bytes on webgpu(0): the adapter's largest buffer ` +
          `(maxBufferSize) is ${max} bytes`,
      );
    }
    const size = Number(nbytes);
    const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
    const buffer = await captured(this.device, `allocating ${size} bytes on webgpu(0)`, () =>
      this.device.createBuffer({ size: Math.max(4, align4(size)), usage }),
    );
    const handle = this.nextHandle;
    this.nextHandle += HANDLE_STRIDE;
    this.allocations.set(handle, { buffer, size });
    return handle;
  }

  /** Frees the allocation `handle` (an address inside it names it too). */
  free(device, handle) {
    this.check(device);
    const base = (handle / HANDLE_STRIDE) * HANDLE_STRIDE;
    const allocation = this.allocations.get(base);
    if (!allocation) {
      throw new RPCFault("ValueError", `webgpu(0) has no allocation at ${hex(handle)} to free`);
    }
    this.allocations.delete(base);
    allocation.buffer.destroy();
  }

  /** Frees every allocation (the session ended). */
  freeAll() {
    for (const { buffer } of this.allocations.values()) buffer.destroy();
    this.allocations.clear();
  }

  /** The buffer and byte range of `nbytes` of tensor `meta`, checked to lie in its allocation. */
  span(meta, nbytes) {
    this.check(meta.device);
    const base = (meta.data / HANDLE_STRIDE) * HANDLE_STRIDE;
    const allocation = this.allocations.get(base);
    if (!allocation) {
      throw new RPCFault("ValueError", `webgpu(0) has no allocation at ${hex(meta.data)}`);
    }
    const offset = meta.data - base + meta.byteOffset;
    if (offset + nbytes > BigInt(allocation.size)) {
      throw new RPCFault(
        "ValueError",
        `${nbytes} bytes at offset ${offset} overrun the allocation of ${allocation.size} bytes ` +
          `at ${hex(base)}`,
      );
    }
    return { buffer: allocation.buffer, offset: Number(offset), size: allocation.size };
  }

  /** The buffer binding of tensor `meta` for a kernel: its buffer, offset and size. */
  binding(meta) {
    const nbytes = tensorBytes(meta);
    const span = this.span(meta, nbytes);
    const alignment = this.device.limits.minStorageBufferOffsetAlignment;
    if (span.offset % alignment !== 0) {
      throw new RPCFault(
        "ValueError",
        `a tensor at byte offset ${span.offset} cannot be bound: WebGPU binds storage at ` +
          `multiples of ${alignment} bytes`,
      );
    }
    const bound = Math.min(Math.max(4, align4(Number(nbytes))), align4(span.size) - span.offset);
    return { buffer: span.buffer, offset: span.offset, size: bound };
  }

  /**
   * Writes `nbytes` into tensor `meta` from `chunks` (an async iterator of byte arrays, the
   * copy's bytes as they arrive), without holding them all. WebGPU writes whole 4-byte words:
   * a partial word at either end is read back, patched and written.
   */
  async write(meta, nbytes, chunks) {
    const { buffer, offset } = this.span(meta, nbytes);
    let at = offset;
    let carry = new Uint8Array(0);
    for await (const chunk of chunks) {
      let data = carry.length ? concat(carry, chunk) : chunk;
      if (at % 4 !== 0) {
        const head = Math.min(4 - (at % 4), data.length);
        await this.patch(buffer, at, data.subarray(0, head));
        at += head;
        data = data.subarray(head);
      }
      const whole = data.length - (data.length % 4);
      if (whole > 0) this.device.queue.writeBuffer(buffer, at, data, 0, whole);
      at += whole;
      carry = data.slice(whole);
    }
    if (carry.length) await this.patch(buffer, at, carry);
  }

  /** Writes `bytes` (within one 4-byte word's span or two) at an unaligned `at`. */
  async patch(buffer, at, bytes) {
    const start = at - (at % 4);
    const words = await this.readBuffer(buffer, start, align4(at + bytes.length) - start);
    words.set(bytes, at - start);
    this.device.queue.writeBuffer(buffer, start, words);
  }

  /** `nbytes` of tensor `meta`. */
  async read(meta, nbytes) {
    const { buffer, offset } = this.span(meta, nbytes);
    const start = offset - (offset % 4);
    const end = align4(offset + Number(nbytes));
    const words = await this.readBuffer(buffer, start, end - start);
    return words.subarray(offset - start, offset - start + Number(nbytes));
  }

  /** `size` bytes (a multiple of 4) of `buffer` from `start`, through a mapped staging buffer,
   * after all work submitted before. */
  async readBuffer(buffer, start, size) {
    if (size === 0) return new Uint8Array(0);
    const staging = this.device.createBuffer({
      size,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    try {
      const encoder = this.device.createCommandEncoder();
      encoder.copyBufferToBuffer(buffer, start, staging, 0, size);
      this.device.queue.submit([encoder.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      return new Uint8Array(staging.getMappedRange()).slice();
    } catch (err) {
      this.checkAlive();
      throw new RPCFault("RuntimeError", `reading webgpu(0) memory failed: ${err.message}`);
    } finally {
      staging.destroy();
    }
  }

  /** Copies between two tensors of this device. */
  copyAmong(from, to) {
    const nbytes = tensorBytes(from);
    if (nbytes !== tensorBytes(to)) {
      throw new RPCFault("ValueError", `a copy of ${nbytes} bytes into ${tensorBytes(to)} bytes`);
    }
    const source = this.span(from, nbytes);
    const target = this.span(to, nbytes);
    if (source.offset % 4 || target.offset % 4 || Number(nbytes) % 4) {
      throw new RPCFault(
        "ValueError",
        "a copy between webgpu(0) tensors moves whole 4-byte words (offsets and size)",
      );
    }
    const size = Number(nbytes);
    if (size === 0) return;
    const encoder = this.device.createCommandEncoder();
    if (source.buffer === target.buffer) {
      // WebGPU copies between two buffers only: within one, through a scratch buffer.
      const scratch = this.device.createBuffer({ size, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
      encoder.copyBufferToBuffer(source.buffer, source.offset, scratch, 0, size);
      encoder.copyBufferToBuffer(scratch, 0, target.buffer, target.offset, size);
      this.device.queue.submit([encoder.finish()]);
      scratch.destroy();
      return;
    }
    encoder.copyBufferToBuffer(source.buffer, source.offset, target.buffer, target.offset, size);
    this.device.queue.submit([encoder.finish()]);
  }

  /** Waits until the GPU finished all work submitted so far. */
  async sync(device) {
    this.check(device);
    await this.device.queue.onSubmittedWorkDone();
    this.checkAlive();
  }
}

/** A BigInt address as hex. */
export function hex(value) {
  return `0x${value.toString(16)}`;
}

function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
