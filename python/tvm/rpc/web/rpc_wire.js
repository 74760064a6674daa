// The wire format of TVM's RPC protocol, for the browser runtime: packet codes, the values of
// packed sequences, little-endian readers and writers, and a byte stream over websocket
// messages. It follows crates/tvm-rpc/src/codec (the server side this page plays).
//
// Every length is checked against the bytes present before anything is read or allocated: a
// malformed packet is an RPCFault of kind ValueError naming what was wrong and where.

/** The magic number that opens a connection, and the "accepted" answer. */
export const RPC_MAGIC = 0xff271;
/** The proxy's answer when a page with the same key is already waiting. */
export const RPC_CODE_DUPLICATE = RPC_MAGIC + 1;
/** The proxy's answer when the key was refused. */
export const RPC_CODE_MISMATCH = RPC_MAGIC + 2;
/** The proxy's answer when it is at its limit of waiting peers. */
export const RPC_CODE_BUSY = RPC_MAGIC + 3;
/** Apache TVM's protocol version. */
export const PROTOCOL_VERSION = "0.8.0";
/** This runtime's protocol version (0.8.0 plus error kinds), announced with `-protocol=`. */
export const OWN_PROTOCOL_VERSION = "0.9.0-tvm-rs";
/** The key option that announces the own protocol version. */
export const OWN_PROTOCOL_OPTION = `-protocol=${OWN_PROTOCOL_VERSION}`;

/** Packet codes (the first i32 of every packet body). */
export const Code = Object.freeze({
  Shutdown: 1,
  InitServer: 2,
  CallFunc: 3,
  Return: 4,
  Exception: 5,
  CopyFromRemote: 6,
  CopyToRemote: 7,
  CopyAck: 8,
  GetGlobalFunc: 9,
  FreeHandle: 10,
  DevSetDevice: 11,
  DevGetAttr: 12,
  DevAllocData: 13,
  DevFreeData: 14,
  DevStreamSync: 15,
  CopyAmongRemote: 16,
  DevAllocDataWithScope: 17,
  DevCreateStream: 18,
  DevFreeStream: 19,
  DevSetStream: 20,
  DevGetCurrentStream: 21,
});

/** The names of the packet codes, for messages. */
export const CODE_NAMES = Object.freeze(
  Object.fromEntries(Object.entries(Code).map(([name, code]) => [code, name])),
);

/** Type indices of the values that travel (tvm/ffi/c_api.h). */
export const TypeIndex = Object.freeze({
  None: 0,
  Int: 1,
  Bool: 2,
  Float: 3,
  OpaquePtr: 4,
  DataType: 5,
  Device: 6,
  DLTensorPtr: 7,
  RawStr: 8,
  ByteArrayPtr: 9,
  SmallStr: 11,
  SmallBytes: 12,
  StaticObjectBegin: 64,
  Str: 65,
  Bytes: 66,
  Function: 68,
  Tensor: 70,
  Module: 73,
});

/** The inner type index of a reference to an object of the other side. */
export const RPC_OBJECT_REF_INDEX = 115;
/** The outer type index of a function of the client that the server may call back. */
export const RPC_CALLBACK_INDEX = 116;
/** The most dimensions a tensor on the wire may have. */
export const MAX_NDIM = 64;

/** An error that travels back to the client as an exception of kind `kind`. */
export class RPCFault extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

/** The connection ended: the session is over (not an error of a request). */
export class ConnectionClosed extends Error {}

const textDecoder = new TextDecoder("utf-8", { fatal: false });
const textEncoder = new TextEncoder();

/** Reads little-endian scalars and byte strings from one packet body. */
export class Reader {
  /** A reader of `bytes`, which `what` names in errors. */
  constructor(bytes, what = "RPC packet") {
    this.what = what;
    this.data = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
  }

  remaining() {
    return this.data.length - this.pos;
  }

  fail(what) {
    return new RPCFault("ValueError", `malformed ${this.what}: ${what} (at byte ${this.pos})`);
  }

  need(n, what) {
    if (n > this.remaining()) {
      throw this.fail(`${what} needs ${n} bytes but only ${this.remaining()} remain`);
    }
  }

  /** A scalar of `size` bytes read with DataView getter `get`. */
  scalar(size, what, get) {
    this.need(size, what);
    const value = get.call(this.view, this.pos, true);
    this.pos += size;
    return value;
  }

  i32(what) {
    return this.scalar(4, what, DataView.prototype.getInt32);
  }

  u32(what) {
    return this.scalar(4, what, DataView.prototype.getUint32);
  }

  u64(what) {
    return this.scalar(8, what, DataView.prototype.getBigUint64);
  }

  i64(what) {
    return this.scalar(8, what, DataView.prototype.getBigInt64);
  }

  f64(what) {
    return this.scalar(8, what, DataView.prototype.getFloat64);
  }

  /** A u64 length, then that many bytes (a view into the packet). */
  bytes(what) {
    const len = this.u64(what);
    if (len > BigInt(this.remaining())) {
      throw this.fail(`${what} claims ${len} bytes but only ${this.remaining()} remain`);
    }
    const out = this.data.subarray(this.pos, this.pos + Number(len));
    this.pos += Number(len);
    return out;
  }

  finish(what) {
    if (this.remaining() !== 0) {
      throw this.fail(`${this.remaining()} unexpected bytes after the ${what}`);
    }
  }
}

/** Appends little-endian scalars and byte strings; `packet()` bodies start with their length. */
export class Writer {
  constructor(capacity = 256) {
    this.buf = new Uint8Array(capacity);
    this.view = new DataView(this.buf.buffer);
    this.len = 0;
  }

  /** A writer of one packet: room for the length, then the code. */
  static packet(code) {
    const writer = new Writer();
    writer.u64(0n);
    writer.i32(code);
    return writer;
  }

  reserve(n) {
    if (this.len + n <= this.buf.length) return;
    let capacity = this.buf.length * 2;
    while (capacity < this.len + n) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.buf.subarray(0, this.len));
    this.buf = grown;
    this.view = new DataView(grown.buffer);
  }

  /** A scalar of `size` bytes written with DataView setter `set`. */
  put(size, set, value) {
    this.reserve(size);
    set.call(this.view, this.len, value, true);
    this.len += size;
  }

  i32(v) {
    this.put(4, DataView.prototype.setInt32, v);
  }

  u32(v) {
    this.put(4, DataView.prototype.setUint32, v);
  }

  u64(v) {
    this.put(8, DataView.prototype.setBigUint64, BigInt(v));
  }

  i64(v) {
    this.put(8, DataView.prototype.setBigInt64, BigInt(v));
  }

  f64(v) {
    this.put(8, DataView.prototype.setFloat64, v);
  }

  raw(bytes) {
    this.reserve(bytes.length);
    this.buf.set(bytes, this.len);
    this.len += bytes.length;
  }

  bytes(bytes) {
    this.u64(bytes.length);
    this.raw(bytes);
  }

  /** The bytes written; for a packet, with its length filled in. */
  finish() {
    return this.buf.subarray(0, this.len);
  }

  finishPacket() {
    this.view.setBigUint64(0, BigInt(this.len - 8), true);
    return this.finish();
  }
}

/** Values of packed sequences, as plain objects `{kind, ...}`: the constructors. */
export const Value = Object.freeze({
  none: () => ({ kind: "none" }),
  int: (value) => ({ kind: "int", value: BigInt(value) }),
  bool: (value) => ({ kind: "bool", value: Boolean(value) }),
  float: (value) => ({ kind: "float", value: Number(value) }),
  handle: (value) => ({ kind: "handle", value: BigInt(value) }),
  str: (value) => ({ kind: "str", value: String(value) }),
  bytes: (value) => ({ kind: "bytes", value }),
  device: (type, id) => ({ kind: "device", value: { type, id } }),
});

function decodeDType(input) {
  const word = input.u32("dtype");
  return { code: word & 0xff, bits: (word >> 8) & 0xff, lanes: word >>> 16 };
}

function decodeDevice(input) {
  return { type: input.i32("device type"), id: input.i32("device id") };
}

/** A tensor descriptor: data address, device, shape, dtype and byte offset. */
export function decodeTensorMeta(input) {
  const data = input.u64("tensor data address");
  const device = decodeDevice(input);
  const ndim = input.i32("tensor ndim");
  if (ndim < 0 || ndim > MAX_NDIM) {
    throw input.fail(`tensor ndim ${ndim} is outside 0..=${MAX_NDIM}`);
  }
  const dtype = decodeDType(input);
  const shape = [];
  for (let i = 0; i < ndim; i++) {
    const dim = input.i64("tensor shape");
    if (dim < 0n) throw input.fail(`tensor dimension ${dim} is negative`);
    shape.push(dim);
  }
  const byteOffset = input.u64("tensor byte offset");
  return { data, device, dtype, shape, byteOffset };
}

/** Bytes of a compact tensor with this descriptor (a BigInt). */
export function tensorBytes(meta) {
  let elements = 1n;
  for (const dim of meta.shape) elements *= dim;
  const bits = BigInt(meta.dtype.bits) * BigInt(meta.dtype.lanes);
  return elements * ((bits + 7n) / 8n);
}

function decodeObject(input, outer) {
  const start = input.pos;
  const inner = input.u32("object type index");
  if (inner === TypeIndex.Str) return Value.str(textDecoder.decode(input.bytes("string")));
  if (inner === TypeIndex.Bytes) return Value.bytes(input.bytes("bytes"));
  if (inner === RPC_OBJECT_REF_INDEX) {
    return { kind: "object", typeIndex: outer, value: input.u64("object handle") };
  }
  input.pos = start;
  throw input.fail(`object type index ${inner} is not supported in RPC calls`);
}

/** One value of a packed sequence. */
export function decodeValue(input) {
  const start = input.pos;
  const index = input.i32("value type index");
  switch (index) {
    case TypeIndex.None:
      return Value.none();
    case TypeIndex.Int:
      return { kind: "int", value: input.i64("int") };
    case TypeIndex.Bool:
      return Value.bool(input.i64("bool") !== 0n);
    case TypeIndex.Float:
      return Value.float(input.f64("float"));
    case TypeIndex.OpaquePtr:
      return { kind: "handle", value: input.u64("handle") };
    case TypeIndex.DataType: {
      const value = decodeDType(input);
      input.i32("dtype padding");
      return { kind: "dtype", value };
    }
    case TypeIndex.Device:
      return { kind: "device", value: decodeDevice(input) };
    case TypeIndex.DLTensorPtr:
      return { kind: "tensor", value: decodeTensorMeta(input) };
    case TypeIndex.RawStr:
      return Value.str(textDecoder.decode(input.bytes("string")));
    case TypeIndex.ByteArrayPtr:
      return Value.bytes(input.bytes("byte array"));
    case TypeIndex.Function:
      return { kind: "function", value: input.u64("function handle") };
    case TypeIndex.Module:
      return { kind: "module", value: input.u64("module handle") };
    default:
      if (index === TypeIndex.SmallStr || index === TypeIndex.SmallBytes) {
        return decodeObject(input, index);
      }
      if (index >= TypeIndex.StaticObjectBegin && index !== TypeIndex.Tensor) {
        return decodeObject(input, index);
      }
      input.pos = start;
      throw input.fail(`type index ${index} cannot travel in an RPC packet`);
  }
}

/** A packed sequence: the count (checked against the bytes left), then the values. */
export function decodeSeq(input) {
  const count = input.i32("argument count");
  if (count < 0 || count > input.remaining() / 4) {
    throw input.fail(
      `argument count ${count} does not fit in the ${input.remaining()} bytes that remain`,
    );
  }
  const values = [];
  for (let i = 0; i < count; i++) values.push(decodeValue(input));
  return values;
}

/** Writes one value; strings go as raw strings and bytes as byte arrays, as replies do. */
export function encodeValue(out, value) {
  switch (value.kind) {
    case "none":
      out.i32(TypeIndex.None);
      break;
    case "int":
      out.i32(TypeIndex.Int);
      out.i64(value.value);
      break;
    case "bool":
      out.i32(TypeIndex.Bool);
      out.i64(value.value ? 1n : 0n);
      break;
    case "float":
      out.i32(TypeIndex.Float);
      out.f64(value.value);
      break;
    case "handle":
      out.i32(TypeIndex.OpaquePtr);
      out.u64(value.value);
      break;
    case "device":
      out.i32(TypeIndex.Device);
      out.i32(value.value.type);
      out.i32(value.value.id);
      break;
    case "str":
      out.i32(TypeIndex.RawStr);
      out.bytes(textEncoder.encode(value.value));
      break;
    case "bytes":
      out.i32(TypeIndex.ByteArrayPtr);
      out.bytes(value.value);
      break;
    default:
      throw new RPCFault("TypeError", `a ${value.kind} value cannot be sent by the browser`);
  }
}

/** A packet with `code` and the packed sequence `values`. */
export function encodeSeqPacket(code, values) {
  const out = Writer.packet(code);
  out.i32(values.length);
  for (const value of values) encodeValue(out, value);
  return out.finishPacket();
}

/** A UTF-8 string as bytes. */
export function utf8(text) {
  return textEncoder.encode(text);
}

/** Bytes as a UTF-8 string (invalid sequences replaced). */
export function text(bytes) {
  return textDecoder.decode(bytes);
}

/**
 * The bytes a websocket delivers, as one stream: packets and their pieces are read across
 * message boundaries. Reads wait for data; a closed stream fails them with ConnectionClosed.
 */
export class ByteStream {
  /** A stream that holds at most `limit` bytes not read yet; past that, `onOverflow` runs
   * (the browser's websocket cannot stop a peer from sending: the page ends the connection). */
  constructor(limit = Infinity, onOverflow = () => {}) {
    this.chunks = [];
    this.head = 0;
    this.available = 0;
    this.waiter = null;
    this.closedWith = null;
    this.limit = limit;
    this.onOverflow = onOverflow;
  }

  push(bytes) {
    if (bytes.length === 0 || this.closedWith !== null) return;
    this.chunks.push(bytes);
    this.available += bytes.length;
    if (this.available > this.limit) {
      this.chunks = [];
      this.available = 0;
      this.close(`the peer sent more than ${this.limit} bytes ahead of what the page has read`);
      this.onOverflow();
    }
    this.wake();
  }

  close(reason) {
    if (this.closedWith === null) this.closedWith = reason || "the connection closed";
    this.wake();
  }

  wake() {
    const waiter = this.waiter;
    this.waiter = null;
    if (waiter) waiter();
  }

  async waitFor(n) {
    while (this.available < n) {
      if (this.closedWith !== null) throw new ConnectionClosed(this.closedWith);
      await new Promise((resolve) => {
        this.waiter = resolve;
      });
    }
  }

  /** Exactly `n` bytes. */
  async read(n) {
    await this.waitFor(n);
    return this.take(n);
  }

  /** Between 1 and `max` bytes: what has arrived, without waiting for more. */
  async readSome(max) {
    await this.waitFor(1);
    return this.take(Math.min(max, this.available));
  }

  async i32() {
    const bytes = await this.read(4);
    return new DataView(bytes.buffer, bytes.byteOffset, 4).getInt32(0, true);
  }

  async u64() {
    const bytes = await this.read(8);
    return new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  }

  take(n) {
    if (n === 0) return new Uint8Array(0);
    const first = this.chunks[0];
    if (first.length - this.head >= n) {
      const out = first.subarray(this.head, this.head + n);
      this.advance(n);
      return out;
    }
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0];
      const part = Math.min(n - filled, chunk.length - this.head);
      out.set(chunk.subarray(this.head, this.head + part), filled);
      filled += part;
      this.advance(part);
    }
    return out;
  }

  advance(n) {
    this.head += n;
    this.available -= n;
    if (this.head === this.chunks[0].length) {
      this.chunks.shift();
      this.head = 0;
    }
  }
}
