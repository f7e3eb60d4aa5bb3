// RFC 8291 decryption of a Web Push message (`aes128gcm`, one record), written from the RFC with node's crypto,
// independently of the relay's code: what a browser does with a push before it hands it to the service worker.
// Checked against the RFC's appendix example in crypto.test.mjs.

import { createDecipheriv, createHmac } from "node:crypto";

const hmac = (key, data) => createHmac("sha256", key).update(data).digest();

/**
 * The plaintext of `body` (the push request's body) for the subscription whose key pair is `uaKeys` (a node
 * `ECDH` on prime256v1) and whose auth secret is `authSecret` (16 bytes). Throws when it does not decrypt.
 */
export function decryptPush(body, uaKeys, authSecret) {
  // Header: salt (16) ‖ record size (4) ‖ key id length (1) ‖ key id (the sender's public key, 65).
  const salt = body.subarray(0, 16);
  const idLength = body[20];
  const asPublic = body.subarray(21, 21 + idLength);
  const ciphertext = body.subarray(21 + idLength);
  const ecdhSecret = uaKeys.computeSecret(asPublic);
  const keyInfo = Buffer.concat([Buffer.from("WebPush: info\0", "latin1"), uaKeys.getPublicKey(), asPublic, Buffer.from([1])]);
  const ikm = hmac(hmac(authSecret, ecdhSecret), keyInfo);
  const prk = hmac(salt, ikm);
  const cek = hmac(prk, Buffer.from("Content-Encoding: aes128gcm\0\x01", "latin1")).subarray(0, 16);
  const nonce = hmac(prk, Buffer.from("Content-Encoding: nonce\0\x01", "latin1")).subarray(0, 12);
  const decipher = createDecipheriv("aes-128-gcm", cek, nonce);
  decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
  const padded = Buffer.concat([decipher.update(ciphertext.subarray(0, ciphertext.length - 16)), decipher.final()]);
  // The last (and only) record ends with the delimiter 2, then zero or more zero bytes of padding.
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end--;
  if (padded[end] !== 2) throw new Error("not a last record (delimiter 2 missing)");
  return padded.subarray(0, end);
}
