// The server side of one RPC session, played by the page over a websocket: it answers the
// client's packets (crates/tvm-rpc/src/endpoint does the same natively) with the page's WebGPU
// device, the files the client uploads, and the kernel modules it loads.

import {
  CODE_NAMES,
  Code,
  ConnectionClosed,
  OWN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  RPCFault,
  RPC_CALLBACK_INDEX,
  Reader,
  TypeIndex,
  Value,
  Writer,
  decodeSeq,
  decodeTensorMeta,
  encodeSeqPacket,
  tensorBytes,
  text,
} from "./rpc_wire.js";
import { hex } from "./webgpu_device.js";
import { KernelTimer } from "./timing.js";
import { WGSLModule, functionsFromJSON, parseSerializedModule } from "./wgsl_module.js";

/** The largest packet body held in memory (copies into tensors are streamed, not counted). */
const MAX_PACKET = 64 << 20;
/** The most bytes of uploaded files a session may hold. */
const MAX_UPLOADED = 256 << 20;
/** The largest websocket message the proxy takes. */
const MAX_MESSAGE = 1 << 20;
/** The bytes queued on the websocket past which sending waits for it to drain. */
const SEND_HIGH_WATER = 8 << 20;

/** A return value of a function, as the protocol's return convention writes it. */
const Ret = Object.freeze({
  none: () => [Value.int(TypeIndex.None), Value.none()],
  int: (v) => [Value.int(TypeIndex.Int), Value.int(v)],
  float: (v) => [Value.int(TypeIndex.Float), Value.float(v)],
  str: (v) => [Value.int(TypeIndex.Str), Value.str(v)],
  bytes: (v) => [Value.int(TypeIndex.Bytes), Value.bytes(v)],
  function: (h) => [Value.int(TypeIndex.Function), Value.handle(h)],
  module: (h) => [Value.int(TypeIndex.Module), Value.handle(h)],
});

/** Argument `index` of `name`'s call, checked to be of `kind`. */
function arg(args, index, kind, name) {
  const value = args[index];
  if (!value) {
    throw new RPCFault("TypeError", `${name} takes at least ${index + 1} arguments, got ${args.length}`);
  }
  if (kind && value.kind !== kind) {
    throw new RPCFault("TypeError", `${name}: argument ${index} must be ${kind}, got ${value.kind}`);
  }
  return value.value;
}

/** One websocket connection to the proxy, as a byte stream with packet writes. */
export class Channel {
  constructor(ws, stream) {
    this.ws = ws;
    this.stream = stream;
  }

  /** Sends `bytes` in messages the proxy accepts, waiting while too much is queued. */
  async send(bytes) {
    const closed = () => new ConnectionClosed(this.stream.closedWith || "the connection closed");
    for (let start = 0; start < bytes.length; start += MAX_MESSAGE) {
      while (this.ws.bufferedAmount > SEND_HIGH_WATER) {
        if (this.ws.readyState !== WebSocket.OPEN) throw closed();
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      if (this.ws.readyState !== WebSocket.OPEN) throw closed();
      this.ws.send(bytes.subarray(start, Math.min(bytes.length, start + MAX_MESSAGE)));
    }
  }
}

/** The server side of one session. */
export class Session {
  constructor(channel, gpu, { ownProtocolOffered, log }) {
    this.channel = channel;
    this.stream = channel.stream;
    this.gpu = gpu;
    this.ownProtocolOffered = ownProtocolOffered;
    this.ownProtocol = false;
    this.log = log;
    this.objects = new Map();
    this.nextHandle = 1n;
    this.files = new Map();
    this.uploaded = 0;
    this.timer = new KernelTimer(gpu);
    this.globals = this.makeGlobals();
  }

  /** Serves the client until it shuts the session down or the connection ends. */
  async run() {
    try {
      await this.init();
      for (;;) {
        const len = await this.stream.u64();
        if (len < 4n) throw new RPCFault("ValueError", `an RPC packet of ${len} bytes has no code`);
        const code = await this.stream.i32();
        if (code === Code.CopyToRemote) {
          await this.copyToRemote(len - 4n);
          continue;
        }
        if (len - 4n > BigInt(MAX_PACKET)) {
          throw new RPCFault("ValueError", `an RPC packet of ${len} bytes exceeds the page's limit of ${MAX_PACKET}`);
        }
        const body = await this.stream.read(Number(len - 4n));
        if (code === Code.Shutdown) return "the client ended the session";
        await this.answer(code, new Reader(body));
      }
    } catch (err) {
      if (err instanceof ConnectionClosed) return err.message;
      throw err;
    } finally {
      this.gpu.freeAll();
      this.objects.clear();
    }
  }

  /** The first packet: kInitServer with a protocol version this page speaks. */
  async init() {
    const len = await this.stream.u64();
    if (len < 4n || len > BigInt(MAX_PACKET)) throw new RPCFault("ValueError", `a first packet of ${len} bytes`);
    const body = new Reader(await this.stream.read(Number(len)));
    if (body.i32("packet code") !== Code.InitServer) {
      throw new RPCFault("ValueError", "the client's first packet was not kInitServer");
    }
    const version = text(body.bytes("protocol version"));
    const args = decodeSeq(body);
    if (version !== PROTOCOL_VERSION && version !== OWN_PROTOCOL_VERSION) {
      await this.reply(
        new RPCFault(
          "RuntimeError",
          `Client protocol version mismatch with the server: server protocol=${PROTOCOL_VERSION} ` +
            `(and ${OWN_PROTOCOL_VERSION}), client protocol=${version}`,
        ),
      );
      throw new ConnectionClosed(`refused protocol version ${version}`);
    }
    this.ownProtocol = this.ownProtocolOffered && version === OWN_PROTOCOL_VERSION;
    if (args.length && !(args[0].kind === "str" && ["", "rpc.LocalSession"].includes(args[0].value))) {
      await this.reply(new RPCFault("ValueError", "the browser page serves its own session only (no session constructor)"));
      return;
    }
    await this.reply([Value.none()]);
  }

  /** Answers one request (a whole packet body read into `input`). */
  async answer(code, input) {
    let result;
    try {
      result = await this.serve(code, input);
    } catch (err) {
      if (err instanceof ConnectionClosed) throw err;
      result = err instanceof RPCFault ? err : new RPCFault("RuntimeError", String(err && err.message ? err.message : err));
    }
    if (result !== undefined) await this.reply(result);
  }

  /** A return of `values`, or the exception of an RPCFault. */
  async reply(result) {
    if (result instanceof RPCFault) {
      const values = this.ownProtocol
        ? [Value.str(result.message), Value.str(result.kind), Value.str("")]
        : [Value.str(`${result.kind}: ${result.message}`)];
      await this.channel.send(encodeSeqPacket(Code.Exception, values));
    } else {
      await this.channel.send(encodeSeqPacket(Code.Return, result));
    }
  }

  /** The reply values of request `code`; undefined when the reply was sent already. */
  async serve(code, input) {
    switch (code) {
      case Code.CallFunc: {
        const handle = input.u64("function handle");
        const args = decodeSeq(input);
        input.finish("packet");
        return this.call(handle, args);
      }
      case Code.CopyFromRemote: {
        const meta = decodeTensorMeta(input);
        const nbytes = input.u64("copy size");
        input.finish("copy header");
        const data = await this.gpu.read(meta, nbytes);
        const header = new Writer(12);
        header.u64(4 + data.length);
        header.i32(Code.CopyAck);
        await this.channel.send(header.finish());
        await this.channel.send(data);
        return undefined;
      }
      case Code.InitServer:
        throw new RPCFault("RuntimeError", "Server has already been initialized");
      case Code.Return:
      case Code.Exception:
      case Code.CopyAck:
        throw new RPCFault("ValueError", `the client sent ${CODE_NAMES[code]} where a request was expected`);
      default:
        if (!(code in CODE_NAMES)) throw new RPCFault("ValueError", `malformed RPC packet: unknown packet code ${code}`);
        const args = decodeSeq(input);
        input.finish("packet");
        return [await this.syscall(code, args)];
    }
  }

  /** A system call's one value. */
  async syscall(code, args) {
    const name = CODE_NAMES[code];
    const gpu = this.gpu;
    switch (code) {
      case Code.GetGlobalFunc: {
        const fname = arg(args, 0, "str", name);
        const fn = this.globals.get(fname);
        return Value.handle(fn ? this.keep({ kind: "function", fn, name: fname }) : 0n);
      }
      case Code.FreeHandle: {
        const handle = args.length && args[0].kind === "handle" ? args[0].value : null;
        if (handle === null) throw new RPCFault("TypeError", "FreeHandle needs a handle");
        this.objects.delete(handle);
        return Value.none();
      }
      case Code.DevSetDevice:
        gpu.check(arg(args, 0, "device", name));
        return Value.none();
      case Code.DevGetAttr: {
        const value = gpu.attribute(arg(args, 0, "device", name), Number(arg(args, 1, "int", name)));
        if (value === null) return Value.none();
        return typeof value === "number" ? Value.int(value) : Value.str(value);
      }
      case Code.DevAllocData:
        return Value.handle(await gpu.alloc(arg(args, 0, "device", name), arg(args, 1, "int", name)));
      case Code.DevAllocDataWithScope: {
        const meta = arg(args, 0, "tensor", name);
        const scope = args[1];
        if (scope && scope.kind === "str" && scope.value !== "global") {
          throw new RPCFault("ValueError", `memory scope '${scope.value}' is not supported (only 'global')`);
        }
        return Value.handle(await gpu.alloc(meta.device, tensorBytes(meta)));
      }
      case Code.DevFreeData:
        gpu.free(arg(args, 0, "device", name), arg(args, 1, "handle", name));
        return Value.none();
      case Code.DevStreamSync:
        await gpu.sync(arg(args, 0, "device", name));
        return Value.none();
      case Code.CopyAmongRemote:
        gpu.copyAmong(arg(args, 0, "tensor", name), arg(args, 1, "tensor", name));
        return Value.none();
      case Code.DevCreateStream:
      case Code.DevGetCurrentStream:
        // One queue: its stream is the null stream.
        gpu.check(arg(args, 0, "device", name));
        return Value.handle(0n);
      case Code.DevFreeStream:
      case Code.DevSetStream:
        gpu.check(arg(args, 0, "device", name));
        return Value.none();
      default:
        throw new RPCFault("ValueError", `${name} is not a system call`);
    }
  }

  /** Streams a copy into a tensor: the bytes go to the GPU as they arrive. A refused copy
   * still consumes its bytes, so the next packet starts where it should. */
  async copyToRemote(len) {
    if (len < 20n) {
      // Not even the fixed part of a tensor descriptor: the stream cannot be trusted after it.
      throw new RPCFault("ValueError", `a copy request of ${len} bytes`);
    }
    const fixed = new Reader(await this.stream.read(20));
    fixed.u64("tensor data address");
    fixed.i32("device type");
    fixed.i32("device id");
    const ndim = fixed.i32("tensor ndim");
    if (ndim < 0 || ndim > 64) throw new RPCFault("ValueError", `copy request with ndim ${ndim}`);
    const headerLen = 20 + 4 + 8 * ndim + 8 + 8;
    if (BigInt(headerLen) > len) throw new RPCFault("ValueError", `a copy request of ${len} bytes`);
    const rest = await this.stream.read(headerLen - 20);
    const header = new Uint8Array(headerLen);
    header.set(fixed.data, 0);
    header.set(rest, 20);
    const input = new Reader(header);
    const meta = decodeTensorMeta(input);
    const nbytes = input.u64("copy size");
    if (BigInt(headerLen) + nbytes !== len) {
      throw new RPCFault("ValueError", `copy request of ${nbytes} bytes in a packet of ${len} bytes`);
    }
    const stream = this.stream;
    let left = Number(nbytes);
    async function* chunks() {
      while (left > 0) {
        const chunk = await stream.readSome(Math.min(left, 4 << 20));
        left -= chunk.length;
        yield chunk;
      }
    }
    let result = [];
    try {
      await this.gpu.write(meta, nbytes, chunks());
    } catch (err) {
      if (err instanceof ConnectionClosed) throw err;
      result = err instanceof RPCFault ? err : new RPCFault("RuntimeError", String(err.message || err));
      while (left > 0) left -= (await stream.readSome(Math.min(left, 4 << 20))).length;
    }
    await this.reply(result);
  }

  /** Keeps `object` under a new handle, which the client frees. */
  keep(object) {
    const handle = this.nextHandle;
    this.nextHandle += 1n;
    this.objects.set(handle, object);
    return handle;
  }

  /** The object kept under `handle`, checked to be a `kind`. */
  object(handle, kind) {
    const object = this.objects.get(handle);
    if (!object || object.kind !== kind) {
      throw new RPCFault("ValueError", `the page has no ${kind} with handle ${hex(handle)}`);
    }
    return object;
  }

  /** Calls function `handle` with `args`; its return value. */
  async call(handle, args) {
    const { fn, name } = this.object(handle, "function");
    for (const value of args) {
      if (value.kind === "object" && value.typeIndex === RPC_CALLBACK_INDEX) {
        throw new RPCFault("TypeError", `${name}: the browser page cannot call client functions back`);
      }
    }
    return fn(args, name);
  }

  /** The page's global functions, by name: each takes the call's values and returns its return. */
  makeGlobals() {
    const gpu = this.gpu;
    const file = (path) => {
      const data = this.files.get(path);
      if (!data) throw new RPCFault("FileNotFoundError", `the page has no uploaded file '${path}'`);
      return data;
    };
    const store = (path, data, append) => {
      const before = append ? (this.files.get(path) || new Uint8Array(0)) : new Uint8Array(0);
      const replaced = this.files.has(path) ? this.files.get(path).length : 0;
      const total = this.uploaded - replaced + before.length + data.length;
      if (total > MAX_UPLOADED) {
        throw new RPCFault("MemoryError", `the page holds at most ${MAX_UPLOADED} bytes of uploaded files; '${path}' would make ${total}`);
      }
      const joined = new Uint8Array(before.length + data.length);
      joined.set(before, 0);
      joined.set(data, before.length);
      this.files.set(path, joined);
      this.uploaded = total;
    };
    const loadModule = async (functions, sourceOf, what) =>
      Ret.module(this.keep({ kind: "module", module: await WGSLModule.build(gpu, functions, sourceOf, what) }));
    const entries = {
      "tvm.rpc.server.upload": (args, name) => {
        store(arg(args, 0, "str", name), arg(args, 1, "bytes", name).slice(), false);
        return Ret.none();
      },
      "tvm.rpc.server.upload_append": (args, name) => {
        store(arg(args, 0, "str", name), arg(args, 1, "bytes", name).slice(), true);
        return Ret.none();
      },
      "tvm.rpc.server.download": (args, name) => Ret.bytes(file(arg(args, 0, "str", name))),
      "tvm.rpc.server.file_size": (args, name) => Ret.int(file(arg(args, 0, "str", name)).length),
      "tvm.rpc.server.download_range": (args, name) => {
        const data = file(arg(args, 0, "str", name));
        const offset = Number(arg(args, 1, "int", name));
        const length = Number(arg(args, 2, "int", name));
        if (offset < 0 || length < 0) {
          throw new RPCFault("ValueError", `${name}: offset ${offset} and length ${length} must not be negative`);
        }
        return Ret.bytes(data.subarray(offset, offset + length));
      },
      "tvm.rpc.server.remove": (args, name) => {
        const path = arg(args, 0, "str", name);
        this.uploaded -= file(path).length;
        this.files.delete(path);
        return Ret.none();
      },
      "tvm.rpc.server.listdir": () => Ret.str([...this.files.keys()].sort().join(",")),
      "tvm.rpc.server.load_module": (args, name) => {
        const path = arg(args, 0, "str", name);
        if (path.endsWith(".wgsl")) {
          const metaPath = path.slice(0, -".wgsl".length) + ".tvm_meta.json";
          const source = text(file(path));
          const functions = functionsFromJSON(text(file(metaPath)), `'${metaPath}'`);
          return loadModule(functions, () => source, `'${path}'`);
        }
        if (path.endsWith(".webgpu")) {
          const { functions, sources } = parseSerializedModule(file(path));
          return loadModule(functions, (k) => sources.get(k), `'${path}'`);
        }
        throw new RPCFault(
          "ValueError",
          `the browser page loads WebGPU modules: '${path}' is neither a .wgsl file (with its ` +
            ".tvm_meta.json) nor a serialized .webgpu module",
        );
      },
      "ffi.Module.load_from_bytes.webgpu": (args, name) => {
        const { functions, sources } = parseSerializedModule(arg(args, 0, "bytes", name));
        return loadModule(functions, (k) => sources.get(k), "webgpu module bytes");
      },
      "tvm.rpc.server.ModuleGetFunction": (args, name) => {
        const { module } = this.object(arg(args, 0, "module", name), "module");
        const fname = arg(args, 1, "str", name);
        const kernel = module.kernel(fname);
        if (!kernel) return Ret.none();
        return Ret.function(this.keep({ kind: "function", name: fname, fn: (callArgs) => kernel.launch(callArgs).then(Ret.none) }));
      },
      "runtime.RPCTimeEvaluator": (args, name) => {
        const { module } = this.object(arg(args, 0, "module", name), "module");
        const fname = arg(args, 1, "str", name);
        const kernel = module.kernel(fname);
        if (!kernel) throw new RPCFault("AttributeError", `the module has no kernel \`${fname}\``);
        const device = { type: Number(arg(args, 2, "int", name)), id: Number(arg(args, 3, "int", name)) };
        gpu.check(device);
        const config = {
          number: Number(arg(args, 4, "int", name)),
          repeat: Number(arg(args, 5, "int", name)),
          minRepeatMs: Number(arg(args, 6, "int", name)),
          limitZeroTimeIterations: Number(arg(args, 7, "int", name)),
          cooldownIntervalMs: Number(arg(args, 8, "int", name)),
          repeatsToCooldown: Number(arg(args, 9, "int", name)),
        };
        const fn = async (callArgs) => {
          const launch = (writes, checked) => kernel.launch(callArgs, writes, checked);
          const seconds = await this.timer.evaluate(launch, config);
          return Ret.bytes(new Uint8Array(new Float64Array(seconds).buffer));
        };
        return Ret.function(this.keep({ kind: "function", name: `time_evaluator(${fname})`, fn }));
      },
      "webgpu.timer_kind": () => Ret.str(this.timer.kind),
      "webgpu.destroy_device": (args, name) => {
        gpu.check(arg(args, 0, "device", name));
        gpu.device.destroy();
        return Ret.none();
      },
      "tvm.web.echo": (args) => {
        const value = args[0] || Value.none();
        const tag = { none: 0, int: 1, bool: 2, float: 3, str: 65, bytes: 66 }[value.kind];
        if (tag === undefined) throw new RPCFault("TypeError", `tvm.web.echo cannot return a ${value.kind}`);
        return [Value.int(tag), value];
      },
    };
    return new Map(Object.entries(entries));
  }
}
