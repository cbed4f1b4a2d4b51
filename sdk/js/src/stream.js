// stream.js - packets from byte streams through libtenso's push decoder (tenso_decoder_*): it
// frames, checks every limit against the headers before it asks for memory, and decodes.
// JavaScript only copies each chunk into the memory the decoder names.
import { wasm, mem, check, slot, u32At } from './engine.js';
import { decodeOptions, bytesOf, convertOwned } from './codec.js';

const live = new FinalizationRegistry((d) => wasm.tenso_decoder_free(d));

/**
 * A push decoder: feed it chunks as they arrive (push), get every packet they complete.
 * Values own their memory. After an error the decoder must be reset() before more bytes.
 */
export class Decoder {
  #d;
  #options;
  constructor(options = {}) {
    check(wasm.tenso_js_decoder_new(slot(0), decodeOptions(options)));
    this.#d = u32At(slot(0));
    this.#options = options;
    live.register(this, this.#d, this);
  }
  /** Decodes `chunk` (any bytes); returns the values of the packets it completed, in order. */
  push(chunk) {
    const bytes = bytesOf(chunk);
    const d = this.#handle();
    const out = [];
    for (let i = 0; i < bytes.length; ) {
      check(wasm.tenso_decoder_buffer(d, slot(0), slot(1)));
      const dst = u32At(slot(0));
      const n = Math.min(u32At(slot(1)), bytes.length - i);
      mem().set(bytes.subarray(i, i + n), dst);
      i += n;
      check(wasm.tenso_decoder_commit(d, n, slot(2)));
      const v = u32At(slot(2));
      if (v) out.push(convertOwned(v, this.#options));
    }
    return out;
  }
  /** True between packets (nothing partial held). */
  get idle() {
    return wasm.tenso_decoder_idle(this.#handle()) !== 0;
  }
  /** Bytes the decoder needs before it can make progress. */
  get needed() {
    return wasm.tenso_decoder_needed(this.#handle()) >>> 0;
  }
  /** End of input: throws TensoTruncatedError when it ends inside a packet. */
  finish() {
    check(wasm.tenso_decoder_finish(this.#handle()));
  }
  /** Drops any partial packet and any error. */
  reset() {
    wasm.tenso_decoder_reset(this.#handle());
  }
  /** Frees the decoder now (else it is freed when collected). */
  close() {
    if (this.#d) {
      live.unregister(this);
      wasm.tenso_decoder_free(this.#d);
      this.#d = 0;
    }
  }
  #handle() {
    if (!this.#d) throw new Error('tenso: the Decoder is closed');
    return this.#d;
  }
}

/** The chunks of a web ReadableStream, a Node Readable or an (async) iterable, in order (the
 *  stream's lock is released when the loop ends). */
export async function* chunksOf(source) {
  if (source && typeof source.getReader === 'function') {
    const reader = source.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        yield value;
      }
    } finally {
      reader.releaseLock();
    }
  } else if (source && typeof source[Symbol.asyncIterator] === 'function') {
    yield* source;
  } else if (source && typeof source[Symbol.iterator] === 'function') {
    yield* source;
  } else {
    throw new TypeError('decodeStream takes a ReadableStream, a Node stream or an (async) iterable of chunks');
  }
}

/**
 * Every packet of a stream, in order: a web ReadableStream<Uint8Array> (a fetch body), a Node
 * Readable, or any async iterable of byte chunks. Throws TensoTruncatedError when the stream
 * ends inside a packet.
 */
export async function* decodeStream(source, options = {}) {
  const decoder = new Decoder(options);
  try {
    for await (const chunk of chunksOf(source)) yield* decoder.push(chunk);
    decoder.finish();
  } finally {
    decoder.close();
  }
}
