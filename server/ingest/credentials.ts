// Spec, Files rule 1: .env, .pem, .p12, .pfx, .cer and .crt files are refused (422), by name and, where the
// bytes give them away, by content (a renamed key or certificate is still one).
import { basename, extname } from "node:path";

const CREDENTIAL_EXTENSIONS = new Set([".env", ".pem", ".p12", ".pfx", ".cer", ".crt"]);

/** Names like `.env`, `.env.local`, `prod.env`, `server.pem`. */
export function isCredentialName(filename: string | undefined): boolean {
  if (!filename) return false;
  const name = basename(filename.replace(/\\/g, "/")).toLowerCase();
  return CREDENTIAL_EXTENSIONS.has(extname(name)) || name === ".env" || name.startsWith(".env.");
}

const PEM = /^\s*-----BEGIN ((RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY|CERTIFICATE|TRUSTED CERTIFICATE|PKCS7|X509 CRL|CERTIFICATE REQUEST)-----/;
// pkcs7-data (1.2.840.113549.1.7.1), which every PKCS#12 file wraps its contents in.
const PKCS7_DATA_OID = Buffer.from([0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01]);
const SECRET_NAME = /(SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|CREDENTIALS?|DATABASE_URL|DSN)/i;

/** Which credential format the first bytes of a file look like, or null. */
export function credentialKindOfContent(head: Uint8Array): string | null {
  const bytes = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  const text = bytes.subarray(0, 4096).toString("latin1");
  if (PEM.test(text)) return "a PEM key or certificate";
  // DER: a SEQUENCE with a long-form length.
  if (bytes[0] === 0x30 && (bytes[1] === 0x82 || bytes[1] === 0x83)) {
    const offset = bytes[1] === 0x82 ? 4 : 5;
    // PKCS#12: SEQUENCE { INTEGER 3, SEQUENCE { pkcs7-data ... } }
    if (bytes[offset] === 0x02 && bytes[offset + 1] === 0x01 && bytes[offset + 2] === 0x03 && bytes.subarray(0, 64).includes(PKCS7_DATA_OID))
      return "a PKCS#12 key store";
    // X.509: SEQUENCE { SEQUENCE (tbsCertificate) { [0] { INTEGER version } ...
    const inner = bytes[offset] === 0x30 ? offset + (bytes[offset + 1] === 0x82 ? 4 : bytes[offset + 1] === 0x83 ? 5 : 2) : -1;
    if (inner > 0 && bytes[inner] === 0xa0 && bytes[inner + 1] === 0x03 && bytes[inner + 2] === 0x02 && bytes[inner + 3] === 0x01) return "a DER certificate";
  }
  if (looksLikeDotEnv(text)) return "an environment file with secrets";
  return null;
}

/** KEY=value lines only (comments and blanks aside), and at least one key named like a secret. */
function looksLikeDotEnv(text: string): boolean {
  const all = text.split(/\r?\n/);
  // The head may end inside a line.
  if (text.length >= 4096) all.pop();
  const lines = all
    .slice(0, 200)
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  if (lines.length === 0) return false;
  let secret = false;
  for (const line of lines) {
    const match = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=/.exec(line);
    if (!match) return false;
    if (SECRET_NAME.test(match[1]!)) secret = true;
  }
  return secret;
}
