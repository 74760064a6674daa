// The page's part of the mutual proof of a shared secret with a keyed proxy (the handshake of
// crates/tvm-rpc/src/handshake.rs): the page sends a fresh nonce Nc in its key, the proxy
// answers with its nonce Ns and HMAC-SHA256(K, "tvm-rpc-server-proof" 0 Nc 0 Ns), which the page
// checks before it sends its own proof HMAC-SHA256(K, "tvm-rpc-client-proof" 0 Nc 0 Ns). Web
// Crypto does the hashing: the page must be a secure context (https, or http from 127.0.0.1 or
// localhost).

import { RPCFault, utf8 } from "./rpc_wire.js";

const SERVER_PROOF = "tvm-rpc-server-proof";
const CLIENT_PROOF = "tvm-rpc-client-proof";

const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

/** 16 random bytes in hex. */
export function freshNonce() {
  return toHex(crypto.getRandomValues(new Uint8Array(16)));
}

async function proof(secret, label, clientNonce, serverNonce) {
  if (!globalThis.crypto || !crypto.subtle) {
    throw new RPCFault(
      "RuntimeError",
      "this page cannot compute authentication proofs: Web Crypto needs a secure context " +
        "(https, or http from 127.0.0.1 or localhost)",
    );
  }
  const key = await crypto.subtle.importKey("raw", utf8(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const message = utf8([label, clientNonce, serverNonce].join("\0"));
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, message));
}

/** The value of option `-name=` in a handshake key, or null. */
export function keyOption(key, name) {
  for (const word of key.split(/\s+/).slice(1)) {
    if (word.startsWith(`-${name}=`)) return word.slice(name.length + 2);
  }
  return null;
}

/**
 * Checks the proxy's proof in its answer `proxyKey` for `clientNonce` and returns the page's
 * proof to send (32 bytes). A proxy that sends no proof, or a wrong one, is refused.
 */
export async function answerProof(secret, clientNonce, proxyKey) {
  const serverNonce = keyOption(proxyKey, "nonce");
  const given = keyOption(proxyKey, "proof");
  if (!serverNonce || !given) {
    throw new RPCFault(
      "RuntimeError",
      "the proxy did not prove that it holds the authentication key: refusing it, since this page has a key",
    );
  }
  const expected = toHex(await proof(secret, SERVER_PROOF, clientNonce, serverNonce));
  let difference = expected.length ^ given.length;
  for (let i = 0; i < expected.length; i++) difference |= expected.charCodeAt(i) ^ given.charCodeAt(i % given.length);
  if (difference !== 0) {
    throw new RPCFault("RuntimeError", "the proxy failed to prove that it holds the authentication key (another key?)");
  }
  return proof(secret, CLIENT_PROOF, clientNonce, serverNonce);
}
