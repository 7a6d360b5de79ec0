// Transcripts. No speech recognizer ships with the server yet (see docs/api.md, "Files"): audio and video
// get their facts, keyframes and this honest note, never a made-up transcript.
export interface Transcript {
  text: string;
}

export const NO_SPEECH_MODEL =
  "No transcript is available: this server has no speech recognition model, so what is said in it is unknown.";

/** Transcribes 16 kHz mono samples; null while no speech recognizer is available. */
export async function transcribe(samples: Float32Array, modelPath: string | null | undefined): Promise<Transcript | null> {
  void samples;
  void modelPath;
  return null;
}
