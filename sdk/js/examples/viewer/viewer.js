// The tenso viewer's logic: decode with libtenso, show the packet as a tree, and the selected
// tensor's facts, statistics and picture (2-D/3-D: an image, viridis for floats; 1-D: a line).
import * as tenso from 'libtenso';

const $ = (id) => document.getElementById(id);
$('version').textContent = `libtenso ${tenso.version} (WebAssembly engine)`;

// Viridis, 9 stops (matplotlib's), interpolated.
const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141], [39, 173, 129],
  [92, 200, 99], [170, 220, 50], [253, 231, 37]];
function viridis(t) {
  const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
  const f = x - i;
  return VIRIDIS[i].map((a, k) => Math.round(a + (VIRIDIS[i + 1][k] - a) * f));
}

// The numbers of a tensor as float64 (complex: magnitudes; bfloat16 and, without
// Float16Array, float16 from their bits).
function numbers(t) {
  const d = t.data;
  if (t.dtype === 'bfloat16') return Float64Array.from(d, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]);
  if (t.dtype === 'float16' && d instanceof Uint16Array) return Float64Array.from(d, halfToFloat);
  if (t.dtype.startsWith('complex')) {
    return Float64Array.from({ length: d.length / 2 }, (_, i) => Math.hypot(d[2 * i], d[2 * i + 1]));
  }
  return Float64Array.from(d, Number);
}
function halfToFloat(h) {
  const e = (h >> 10) & 31;
  const m = h & 1023;
  const s = h & 32768 ? -1 : 1;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

function stats(v) {
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let sq = 0;
  let n = 0;
  let nan = 0;
  for (const x of v) {
    if (Number.isNaN(x)) {
      nan++;
      continue;
    }
    min = Math.min(min, x);
    max = Math.max(max, x);
    sum += x;
    sq += x * x;
    n++;
  }
  const mean = n ? sum / n : NaN;
  return { min, max, mean, std: n ? Math.sqrt(Math.max(sq / n - mean * mean, 0)) : NaN, nan };
}

const fmt = (x) => (Number.isInteger(x) ? String(x) : x.toPrecision(6));
const bytes = (n) => (n < 1024 ? `${n} B` : n < 2 ** 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 2 ** 20).toFixed(2)} MiB`);

function describe(value) {
  if (value instanceof tenso.Tensor) return `${value.dtype} [${value.shape.join(', ')}]`;
  if (value instanceof tenso.SparseMatrix) return `sparse ${value.format} [${value.shape.join(', ')}], nnz ${value.nnz}`;
  if (value instanceof tenso.QuantizedTensor) return `${value.dtype} ${value.scheme} [${value.shape.join(', ')}]`;
  if (value instanceof tenso.StringTensor) return `string [${value.length}]`;
  if (value instanceof tenso.RaggedArray) return `ragged ${value.dtype}, ${value.length} rows`;
  if (value instanceof tenso.GpuIpcRef) return `GPU IPC reference, ${value.nbytes} bytes`;
  return `bundle, ${Object.keys(value).length} entries`;
}

function draw(t, values, s) {
  const canvas = $('canvas');
  const ctx = canvas.getContext('2d');
  const shape = t.shape;
  const rgb = shape.length === 3 && (shape[2] === 3 || shape[2] === 4) && t.dtype === 'uint8';
  if (shape.length >= 2) {
    // 2-D, an RGB(A) image, or the first 2-D slice of anything with more dimensions.
    const [h, w] = shape.length === 2 || rgb ? [shape[0], shape[1]] : shape.slice(-2);
    const scale = Math.max(1, Math.floor(512 / Math.max(h, w)));
    canvas.width = w * scale;
    canvas.height = h * scale;
    const img = ctx.createImageData(w, h);
    const span = s.max - s.min || 1;
    for (let i = 0; i < h * w; i++) {
      const px = rgb ? [0, 1, 2].map((c) => values[i * shape[2] + c]) : viridis((values[i] - s.min) / span);
      img.data.set([...px, 255], 4 * i);
    }
    const tmp = new OffscreenCanvas(w, h);
    tmp.getContext('2d').putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(tmp, 0, 0, w * scale, h * scale);
  } else {
    canvas.width = 640;
    canvas.height = 240;
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.strokeStyle = '#1f77b4';
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    const n = values.length;
    const span = s.max - s.min || 1;
    for (let i = 0; i < n; i++) {
      const x = n > 1 ? (i / (n - 1)) * (canvas.width - 10) + 5 : canvas.width / 2;
      const y = canvas.height - 5 - ((values[i] - s.min) / span) * (canvas.height - 10);
      if (i) ctx.lineTo(x, y);
      else ctx.moveTo(x, y);
    }
    ctx.stroke();
  }
  canvas.dataset.drawn = shape.length >= 2 ? 'image' : 'line';
}

function show(name, value) {
  $('title').textContent = name;
  const rows = [['kind', describe(value)]];
  let tensor = value instanceof tenso.Tensor ? value : null;
  if (value instanceof tenso.QuantizedTensor) {
    rows.push(['scales', value.scales.length], ['packed bytes', bytes(value.data.length)]);
    tensor = tenso.dequantize(value);
    rows.push(['shown', 'dequantized (float32)']);
  }
  if (value instanceof tenso.StringTensor) rows.push(['strings', value.strings.slice(0, 20).map((x) => JSON.stringify(x)).join(', ')]);
  if (value instanceof tenso.SparseMatrix) tensor = value.data;
  if (value instanceof tenso.RaggedArray) tensor = value.flat;
  const canvas = $('canvas');
  canvas.width = canvas.height = 1;
  delete canvas.dataset.drawn;
  if (tensor) {
    rows.push(['dtype', tensor.dtype], ['shape', `[${tensor.shape.join(', ')}]`], ['elements', tensor.size],
      ['body', bytes(tensor.nbytes)]);
    const values = numbers(tensor);
    if (values.length) {
      const s = stats(values);
      rows.push(['min', fmt(s.min)], ['max', fmt(s.max)], ['mean', fmt(s.mean)], ['std', fmt(s.std)]);
      if (s.nan) rows.push(['NaN', s.nan]);
      if (tensor.shape.length >= 1) draw(tensor, values, s);
    }
  }
  $('info').replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement('tr');
    tr.innerHTML = '<th></th><td></td>';
    tr.children[0].textContent = k;
    tr.children[1].textContent = String(v);
    return tr;
  }));
}

function tree(name, value, parent) {
  const li = document.createElement('li');
  const label = document.createElement('span');
  label.textContent = `${name}: ${describe(value)}`;
  label.onclick = () => {
    document.querySelectorAll('#tree span.selected').forEach((e) => e.classList.remove('selected'));
    label.classList.add('selected');
    show(name, value);
  };
  li.append(label);
  const plain = value && Object.getPrototypeOf(value) === Object.prototype;
  if (plain) {
    const ul = document.createElement('ul');
    for (const [k, v] of Object.entries(value)) tree(k, v, ul);
    li.append(ul);
  }
  parent.append(li);
  return label;
}

function open(packet, source) {
  $('error').textContent = '';
  const info = tenso.packetInfo(packet);
  const value = tenso.loads(packet);
  const ul = document.createElement('ul');
  const first = tree(source, value, ul);
  $('tree').replaceChildren(ul, Object.assign(document.createElement('p'), {
    textContent: `${info.kind}, protocol v${info.version}, ${bytes(packet.byteLength)}` +
      `${info.integrity ? ', XXH3 footer checked' : ''}${info.compressed ? ', LZ4' : ''}`,
  }));
  // A bundle opens on its first tensor; anything else on itself.
  const leaf = [...ul.querySelectorAll('li')].find((li) => !li.querySelector('ul'));
  (leaf ? leaf.firstChild : first).click();
  document.body.dataset.state = 'shown';
}

function fail(e) {
  $('error').textContent = `${e.name}: ${e.message}`;
  document.body.dataset.state = 'error';
}

$('file').onchange = async (ev) => {
  const f = ev.target.files[0];
  if (!f) return;
  try {
    open(await f.arrayBuffer(), f.name);
  } catch (e) {
    fail(e);
  }
};
async function fetchUrl(url) {
  try {
    const response = await fetch(url);
    const value = await response.clone().arrayBuffer();
    if (!response.ok) await tenso.readTensorResponse(response); // throws TensoHTTPError with the detail
    open(value, new URL(url, location.href).pathname);
  } catch (e) {
    fail(e);
  }
}
$('urlform').onsubmit = (ev) => {
  ev.preventDefault();
  fetchUrl($('url').value);
};
const initial = new URLSearchParams(location.search).get('url');
if (initial) {
  $('url').value = initial;
  fetchUrl(initial);
}
