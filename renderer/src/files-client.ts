// The Files API as the window uses it: uploads with progress (XMLHttpRequest reports upload progress, fetch
// does not), one file's object, delete. The list itself comes pushed (state/window-state.ts). Errors carry the
// server's own message, to show on the spot.
import type { FileOut } from "../../server/features/console/wire";
import { apiErrorOf, apiJson, withWindowKey } from "./api/http";

function upload(baseUrl: string, apiKey: string, file: File, onProgress: (fraction: number) => void): Promise<FileOut> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `${baseUrl}/files`);
    xhr.setRequestHeader("Authorization", `Bearer ${apiKey}`);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onload = () => {
      if (xhr.status === 200) resolve(JSON.parse(xhr.responseText) as FileOut);
      else reject(apiErrorOf(xhr.status, xhr.responseText, xhr.getResponseHeader("x-request-id")));
    };
    xhr.onerror = () => reject(apiErrorOf(0, ""));
    const form = new FormData();
    form.append("purpose", "user_data");
    form.append("file", file, file.name);
    xhr.send(form);
  });
}

/** `baseUrl`: the OpenAI base URL (…/v1). */
export function uploadFile(baseUrl: string, file: File, onProgress: (fraction: number) => void): Promise<FileOut> {
  return withWindowKey((key) => upload(baseUrl, key, file, onProgress));
}

export function getFile(baseUrl: string, id: string): Promise<FileOut> {
  return apiJson<FileOut>(`${baseUrl}/files/${encodeURIComponent(id)}`);
}

export function deleteFile(baseUrl: string, id: string): Promise<unknown> {
  return apiJson(`${baseUrl}/files/${encodeURIComponent(id)}`, { method: "DELETE" });
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
