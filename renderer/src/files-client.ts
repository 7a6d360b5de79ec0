// The Files API as the window uses it: uploads with progress (XMLHttpRequest reports upload progress, fetch
// does not), list and delete. Errors carry the server's own message, to show on the spot.

export interface FileOut {
  id: string;
  object: "file";
  filename: string;
  purpose: string;
  mime_type: string;
  size: number;
  status: "uploaded" | "processed" | "error";
  status_details: string | null;
  content_kind: string;
  token_estimate: number;
  created_at: number;
  expires_at: number;
}

export class FileApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | null,
  ) {
    super(message);
  }
}

function errorOf(status: number, body: string): FileApiError {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string; code?: string } };
    if (parsed.error?.message) return new FileApiError(parsed.error.message, status, parsed.error.code ?? null);
  } catch {
    // not JSON
  }
  return new FileApiError(status === 0 ? "The server could not be reached." : `The server answered ${status}.`, status, null);
}

export function uploadFile(baseUrl: string, apiKey: string, file: File, onProgress: (fraction: number) => void): Promise<FileOut> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `${baseUrl}/files`);
    xhr.setRequestHeader("Authorization", `Bearer ${apiKey}`);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onload = () => {
      if (xhr.status === 200) resolve(JSON.parse(xhr.responseText) as FileOut);
      else reject(errorOf(xhr.status, xhr.responseText));
    };
    xhr.onerror = () => reject(errorOf(0, ""));
    const form = new FormData();
    form.append("purpose", "user_data");
    form.append("file", file, file.name);
    xhr.send(form);
  });
}

async function call<T>(baseUrl: string, apiKey: string, path: string, method = "GET"): Promise<T> {
  const res = await fetch(`${baseUrl}${path}`, { method, headers: { Authorization: `Bearer ${apiKey}` } });
  const body = await res.text();
  if (!res.ok) throw errorOf(res.status, body);
  return JSON.parse(body) as T;
}

export async function listFiles(baseUrl: string, apiKey: string): Promise<FileOut[]> {
  return (await call<{ data: FileOut[] }>(baseUrl, apiKey, "/files?limit=100")).data;
}

export function getFile(baseUrl: string, apiKey: string, id: string): Promise<FileOut> {
  return call<FileOut>(baseUrl, apiKey, `/files/${encodeURIComponent(id)}`);
}

export function deleteFile(baseUrl: string, apiKey: string, id: string): Promise<unknown> {
  return call(baseUrl, apiKey, `/files/${encodeURIComponent(id)}`, "DELETE");
}

/** "in 30 days", "in 5 hours", "expired" */
export function expiresIn(expiresAt: number, now = Date.now() / 1000): string {
  const seconds = expiresAt - now;
  if (seconds <= 0) return "expired";
  const days = Math.floor(seconds / 86400);
  if (days >= 1) return `in ${days} day${days === 1 ? "" : "s"}`;
  const hours = Math.floor(seconds / 3600);
  return hours >= 1 ? `in ${hours} hour${hours === 1 ? "" : "s"}` : "within an hour";
}

export const KIND_LABEL: Record<string, string> = {
  text: "Text",
  pdf: "PDF",
  image: "Image",
  audio: "Audio",
  video: "Video",
  iwork: "iWork",
};
