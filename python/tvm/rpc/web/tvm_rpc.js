// The browser runtime of TVM's RPC: a web page that registers with an RPC proxy over a
// websocket as a server under a key, serves each client the proxy pairs with it (one at a time)
// with the browser's WebGPU device, and registers again when the session ends. A Python client
// then reaches it with `tvm.rpc.connect(proxy_host, proxy_port, key="webgpu")`.
//
// Plain JavaScript modules, no build step: the proxy serves them next to the page.

import {
  ByteStream,
  ConnectionClosed,
  OWN_PROTOCOL_OPTION,
  RPC_CODE_BUSY,
  RPC_CODE_DUPLICATE,
  RPC_CODE_MISMATCH,
  RPC_MAGIC,
  Writer,
  text,
  utf8,
} from "./rpc_wire.js";
import { answerProof, freshNonce, keyOption } from "./auth.js";
import { Channel, Session } from "./rpc_session.js";
import { WebGPUDevice } from "./webgpu_device.js";

/** Close codes the page sends (a page may send 1000 and 3000 to 4999 only): a text message
 * arrived, and too much arrived unread. */
const CLOSE_NOT_BINARY = 4003;
const CLOSE_TOO_MUCH_UNREAD = 4009;

/** How long the page waits before registering again after a failure. */
const RETRY_MS = 2000;
/** The most bytes a client may send ahead of what the page has read: a request of the largest
 * size the page takes (64 MiB) and room for the next. */
const MAX_UNREAD = 96 << 20;

/** Opens a websocket to `url`, its messages fed to a byte stream. */
async function openChannel(url) {
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const stream = new ByteStream(MAX_UNREAD, () => ws.close(CLOSE_TOO_MUCH_UNREAD, "too much data unread"));
  ws.onmessage = (event) => {
    if (typeof event.data === "string") {
      stream.close("the proxy sent a text message");
      ws.close(CLOSE_NOT_BINARY, "binary messages only");
      return;
    }
    stream.push(new Uint8Array(event.data));
  };
  ws.onclose = (event) => stream.close(`the connection closed (code ${event.code})`);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new ConnectionClosed(`cannot open a websocket to ${url}`));
  });
  ws.onerror = null;
  return new Channel(ws, stream);
}

/** Reads the proxy's answer: its code, and the key that follows an acceptance. */
async function readAnswer(channel, key) {
  const code = await channel.stream.i32();
  const refusals = {
    [RPC_CODE_DUPLICATE]: `another page is already registered with key '${key}'`,
    [RPC_CODE_MISMATCH]: `the proxy refused key '${key}' (or gave up waiting for a client)`,
    [RPC_CODE_BUSY]: "the proxy is at its limit of waiting servers",
  };
  if (code !== RPC_MAGIC) {
    throw new ConnectionClosed(refusals[code] || `the proxy answered ${code}: not a TVM RPC proxy`);
  }
  const length = await channel.stream.i32();
  if (length < 0 || length > 4096) throw new ConnectionClosed(`the proxy sent a key of ${length} bytes`);
  return text(await channel.stream.read(length));
}

/**
 * Registers as server `key` with the proxy at `url` (proving `authKey` to a keyed proxy, when
 * given) and waits to be paired: resolves with the channel and the client's key once a client
 * arrives.
 */
export async function register(url, key, authKey) {
  const channel = await openChannel(url);
  try {
    const clientNonce = authKey ? freshNonce() : null;
    const options = clientNonce ? `${OWN_PROTOCOL_OPTION} -cnonce=${clientNonce}` : OWN_PROTOCOL_OPTION;
    const fullKey = utf8(`server:${key} ${options}`);
    const hello = new Writer(8 + fullKey.length);
    hello.i32(RPC_MAGIC);
    hello.i32(fullKey.length);
    hello.raw(fullKey);
    await channel.send(hello.finish());
    let answer = await readAnswer(channel, key);
    if (authKey) {
      await channel.send(await answerProof(authKey, clientNonce, answer));
      answer = await readAnswer(channel, key);
    } else if (keyOption(answer, "auth") || keyOption(answer, "nonce")) {
      throw new ConnectionClosed(
        "the proxy requires an authentication key: open the page with #auth=<key> in its address",
      );
    }
    return { channel, clientKey: answer };
  } catch (err) {
    channel.ws.close();
    throw err;
  }
}

/** Serves clients forever: registers, serves one session, registers again. */
export async function servePage({ proxyUrl, key, authKey, report }) {
  let gpu = null;
  for (;;) {
    try {
      if (!gpu || gpu.lost) {
        gpu = await WebGPUDevice.open();
        report({ adapter: gpu.info.name, timer: gpu.timestamps ? "gpu-timestamps" : "wall-clock" });
      }
      report({ state: "waiting" }, `registered with ${proxyUrl} as '${key}', waiting for a client`);
      const { channel, clientKey } = await register(proxyUrl, key, authKey);
      report({ state: "serving" }, `serving ${clientKey}`);
      const session = new Session(channel, gpu, {
        ownProtocolOffered: clientKey.split(/\s+/).includes(OWN_PROTOCOL_OPTION),
      });
      try {
        const why = await session.run();
        report({ state: "idle" }, `session ended: ${why}`);
      } catch (err) {
        report({ state: "idle" }, `session ended with an error: ${err.kind || err.name}: ${err.message}`);
      } finally {
        channel.ws.close();
      }
    } catch (err) {
      report({ state: "retrying" }, `${err.kind || err.name}: ${err.message}; retrying in ${RETRY_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
}

/**
 * Starts the page: the proxy's websocket from `?proxy=` (default: the server that served the
 * page, at /ws), the key from `?key=` (default `webgpu`), and the shared secret of a keyed proxy
 * from `#auth=`. Progress goes to the `#state`,
 * `#adapter` and `#log` elements and to `window.tvmRpc`.
 */
export function startPage(doc) {
  const params = new URLSearchParams(doc.location.search);
  const scheme = doc.location.protocol === "https:" ? "wss" : "ws";
  const proxyUrl = params.get("proxy") || `${scheme}://${doc.location.host}/ws`;
  const key = params.get("key") || "webgpu";
  // The authentication key travels in the fragment, which the browser never sends to a server;
  // it is taken off the address bar once read.
  const authKey = new URLSearchParams(doc.location.hash.slice(1)).get("auth");
  if (authKey !== null) history.replaceState(null, "", doc.location.pathname + doc.location.search);

  const status = { state: "starting", adapter: null, timer: null, key, proxyUrl, log: [] };
  globalThis.tvmRpc = status;
  const report = (fields, line) => {
    Object.assign(status, fields);
    for (const [name, value] of Object.entries(fields)) {
      const element = doc.getElementById(name);
      if (element) element.textContent = value;
    }
    if (line) {
      const stamped = `${new Date().toISOString().slice(11, 23)} ${line}`;
      status.log.push(stamped);
      if (status.log.length > 200) status.log.shift();
      console.log(`[tvm rpc] ${line}`);
      const log = doc.getElementById("log");
      if (log) log.textContent = status.log.join("\n");
    }
  };
  report({ key, proxyUrl });
  if (authKey !== null && !authKey.trim()) {
    report({ state: "error" }, "the authentication key (#auth=) is empty: leave it out for no authentication");
    return Promise.resolve();
  }
  return servePage({ proxyUrl, key, authKey, report });
}
