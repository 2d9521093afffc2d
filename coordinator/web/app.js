// The dashboard's logic: reads the coordinator's JSON API (the same messages
// as the gRPC API, proto field names, 64-bit integers as strings) and draws
// with Chart.js. Polls while the selected sweep runs. When it has drawn, it
// sets data-state="drawn" and data-* counts on <body> for the browser test.
'use strict';

const API = 'moetune.v1.Moetune/';
const POLL_MS = 2000;
const COLORS = ['#2563eb', '#dc2626', '#059669', '#d97706', '#7c3aed',
                '#0891b2', '#db2777', '#4b5563'];
const FINAL = ['DONE', 'FAILED', 'INCORRECT', 'UNAVAILABLE', 'CANCELLED',
               'TIMEOUT'];

const charts = {};
let selectedSweep = null;
let pollTimer = null;

// One API call. A bearer token, when the coordinator wants one, is read from
// localStorage["moetune_token"].
async function call(method, params = {}) {
  const query = new URLSearchParams(params).toString();
  const headers = {};
  const token = window.localStorage && localStorage.getItem('moetune_token');
  if (token) headers.Authorization = 'Bearer ' + token;
  const response = await fetch(API + method + (query ? '?' + query : ''),
                                {headers});
  const body = await response.json();
  if (!response.ok) throw new Error(method + ': ' + body.message);
  return body;
}

function showError(error) {
  const element = document.getElementById('error');
  element.textContent = error ? String(error.message || error) : '';
  element.hidden = !error;
  if (error) document.body.dataset.error = element.textContent;
}

async function allTrials(sweepId) {
  const trials = [];
  let token = '';
  do {
    const page = await call('QueryTrials', {sweep_id: sweepId, page_size: 10000,
                                            page_token: token});
    trials.push(...page.trials);
    token = page.next_page_token;
  } while (token);
  return trials;
}

function finishedCount(sweep) {
  return FINAL.reduce((sum, s) => sum + (sweep.trial_counts[s] || 0), 0);
}

function renderSweeps(sweeps) {
  const body = document.querySelector('#sweeps tbody');
  body.replaceChildren(...sweeps.map((sweep) => {
    const row = document.createElement('tr');
    row.dataset.sweep = sweep.sweep_id;
    if (sweep.sweep_id === selectedSweep) row.className = 'selected';
    const done = finishedCount(sweep);
    const percent = sweep.total_trials ? 100 * done / sweep.total_trials : 0;
    const cells = [sweep.sweep_id, sweep.name, sweep.state, null,
                   new Date(Number(sweep.created_at_unix_ms)).toISOString()
                       .slice(0, 16).replace('T', ' ')];
    for (const value of cells) {
      const cell = document.createElement('td');
      if (value === null) {
        cell.innerHTML = '<span class="bar mini"><div></div></span> ';
        cell.querySelector('.bar > div').style.width = percent + '%';
        cell.append(`${done}/${sweep.total_trials}`);
      } else {
        cell.textContent = value;
      }
      row.append(cell);
    }
    row.addEventListener('click', () => select(sweep.sweep_id));
    return row;
  }));
}

function renderProgress(sweep) {
  const done = finishedCount(sweep);
  document.getElementById('sweep-title').textContent =
      `Sweep ${sweep.sweep_id}: ${sweep.name} (${sweep.state})`;
  document.getElementById('progress-fill').style.width =
      (sweep.total_trials ? 100 * done / sweep.total_trials : 0) + '%';
  const counts = Object.entries(sweep.trial_counts)
      .filter(([, n]) => n > 0).map(([state, n]) => `${state} ${n}`);
  document.getElementById('progress-text').textContent =
      `${done} of ${sweep.total_trials} trials finished — ${counts.join(', ')}`;
}

// Whether the trial's attention is data-parallel (TrialConfig.
// attention_split ATTENTION_DP; unset means ATTENTION_TP).
function dpAttention(trial) {
  return trial.config.attention_split === 'ATTENTION_DP';
}

// The fastest full-fidelity DONE trial per (backend, attention, context,
// batch): what a line per backend (and attention layout) shows. Screening
// rungs stand in only where nothing else was measured.
function bestPoints(trials) {
  const best = new Map();
  for (const trial of trials) {
    if (trial.state !== 'DONE') continue;
    const stats = trial.result.stats;
    const key = [trial.config.moe_backend, dpAttention(trial),
                 trial.workload.context_length,
                 trial.workload.batch_size].join('|');
    const old = best.get(key);
    const better = !old || (trial.rung === 0 && old.rung !== 0) ||
        (trial.rung === old.rung &&
         stats.median_us < old.result.stats.median_us);
    if (better) best.set(key, trial);
  }
  return [...best.values()];
}

// Series label -> points sorted by batch. Data-parallel attention's points
// are lines of their own (" dp-attn": the layout a tp-vs-dp sweep compares);
// the context joins the label only when the sweep has more than one.
function groupSeries(points) {
  const contexts = new Set(points.map((t) => t.workload.context_length));
  const series = new Map();
  for (const trial of points) {
    const label = trial.config.moe_backend +
        (dpAttention(trial) ? ' dp-attn' : '') +
        (contexts.size > 1 ? ` ctx ${trial.workload.context_length}` : '');
    if (!series.has(label)) series.set(label, []);
    series.get(label).push(trial);
  }
  for (const list of series.values()) {
    list.sort((a, b) => a.workload.batch_size - b.workload.batch_size);
  }
  return series;
}

function configText(trial) {
  const c = trial.config;
  // As backends::TileText: "128x256", "128x256s4" with a ring depth.
  const stages = c.tile && c.tile.stages ? `s${c.tile.stages}` : '';
  const tile = c.tile && c.tile.block_n
      ? `${c.tile.block_n}x${c.tile.block_k}${stages}`
      : '-';
  // Data-parallel attention is another layout of the same tp x ep ranks.
  const attention = dpAttention(trial) ? ' dp-attn' : '';
  return `tile ${tile}, tp${c.tp}xep${c.ep}${attention}, ` +
      `graph ${c.cuda_graph ? 'on' : 'off'}`;
}

// A line with a shaded band between low(t) and high(t), per series.
function bandDatasets(series, value, low, high) {
  const datasets = [];
  let index = 0;
  for (const [label, list] of series) {
    const color = COLORS[index++ % COLORS.length];
    const at = (f) => list.map((t) => ({x: t.workload.batch_size, y: f(t),
                                        trial: t}));
    datasets.push({label: label + ' 95% low', data: at(low), borderWidth: 0,
                   pointRadius: 0, fill: false, band: true});
    datasets.push({label: label + ' 95% high', data: at(high), borderWidth: 0,
                   pointRadius: 0, backgroundColor: color + '33', fill: '-1',
                   band: true});
    datasets.push({label, data: at(value), borderColor: color,
                   backgroundColor: color, pointRadius: 3, fill: false});
  }
  return datasets;
}

function axisOptions(title, logX, yTitle, logY) {
  return {
    animation: false,
    responsive: true,
    parsing: false,
    plugins: {
      title: {display: true, text: title},
      legend: {labels: {filter: (item, data) =>
          !data.datasets[item.datasetIndex].band}},
      tooltip: {filter: (item) => !item.dataset.band,
                callbacks: {afterLabel: (item) => item.raw.trial ?
                    configText(item.raw.trial) : ''}},
    },
    scales: {
      x: {type: logX ? 'logarithmic' : 'linear',
          title: {display: true, text: 'batch (tokens per step)'}},
      y: {type: logY ? 'logarithmic' : 'linear',
          title: {display: true, text: yTitle}},
    },
  };
}

function draw(id, datasets, options) {
  if (charts[id]) charts[id].destroy();
  charts[id] = new Chart(document.getElementById(id), {type: 'line',
                                                      data: {datasets},
                                                      options});
}

// The three charts of the trials; the points drawn and the series' labels.
function drawCharts(trials) {
  const points = bestPoints(trials);
  const series = groupSeries(points);
  const batches = points.map((t) => t.workload.batch_size);
  const logX = batches.length > 0 &&
      Math.max(...batches) / Math.min(...batches) >= 8;
  const stats = (t) => t.result.stats;
  // The stored efficiency, so that the page follows the worker's definition
  // (modelled communication, for one, is left out of it); its interval is
  // the same ratio at the interval's ends of the median.
  const efficiencyAt = (t, us) =>
      100 * t.result.roofline.efficiency * stats(t).median_us / us;
  draw('latency-chart',
       bandDatasets(series, (t) => stats(t).median_us,
                    (t) => stats(t).ci_low_us, (t) => stats(t).ci_high_us),
       axisOptions('Latency', logX, 'median (µs)', true));
  draw('efficiency-chart',
       bandDatasets(series, (t) => efficiencyAt(t, stats(t).median_us),
                    (t) => efficiencyAt(t, stats(t).ci_high_us),
                    (t) => efficiencyAt(t, stats(t).ci_low_us)),
       axisOptions('Efficiency', logX, '% of the roofline floor', false));
  draw('roofline-chart', rooflineDatasets(series),
       axisOptions('Roofline', logX, 'GB/s', false));
  return {points: points.length, series: [...series.keys()]};
}

// Achieved bandwidth per backend, and the ceiling the floor assumes:
// bytes / (floor - communication floor), the worker's read bandwidth.
function rooflineDatasets(series) {
  const datasets = [];
  const ceiling = new Map();
  let index = 0;
  for (const [label, list] of series) {
    const color = COLORS[index++ % COLORS.length];
    datasets.push({label, borderColor: color, backgroundColor: color,
                   pointRadius: 3, data: list.map((t) => {
      const r = t.result.roofline;
      const memory_us = r.floor_us - r.comm_floor_us;
      if (memory_us > 0) {
        ceiling.set(t.workload.batch_size, r.bytes / memory_us / 1e3);
      }
      return {x: t.workload.batch_size,
              y: r.bytes / t.result.stats.median_us / 1e3, trial: t};
    })});
  }
  const roof = [...ceiling.entries()].sort((a, b) => a[0] - b[0])
      .map(([x, y]) => ({x, y}));
  datasets.push({label: 'ceiling (measured bandwidth)', data: roof,
                 borderColor: '#111827', borderDash: [6, 4], pointRadius: 0});
  return datasets;
}

async function renderWinners(sweepId) {
  const element = document.getElementById('winners');
  try {
    const best = await call('GetBest', {sweep_id: sweepId});
    element.textContent = best.workloads.filter((w) => w.best).map((w) =>
        `batch ${w.workload.batch_size}, ctx ${w.workload.context_length}: ` +
        `${w.best.config.moe_backend} (${configText(w.best)}) ` +
        `${w.best.result.stats.median_us.toFixed(1)} µs` +
        (w.tie ? ' (tie)' : '')).join(' · ');
  } catch (error) {
    element.textContent = '';  // no winner yet: nothing to say
  }
}

async function refreshSweep() {
  if (selectedSweep === null) return;
  const sweepId = selectedSweep;
  const [sweep, trials] = await Promise.all([call('GetSweep', {sweep_id: sweepId}),
                                             allTrials(sweepId)]);
  if (sweepId !== selectedSweep) return;  // another was chosen meanwhile
  renderProgress(sweep);
  const drawn = drawCharts(trials);
  await renderWinners(sweepId);
  Object.assign(document.body.dataset, {
    state: 'drawn', sweep: sweepId, trials: trials.length,
    points: drawn.points, series: drawn.series.join('; '),
    charts: Object.keys(charts).length,
    datasets: Object.values(charts).reduce(
        (n, c) => n + c.data.datasets.filter((d) => d.data.length).length, 0),
  });
  clearTimeout(pollTimer);
  if (sweep.state === 'RUNNING') pollTimer = setTimeout(poll, POLL_MS);
}

async function refreshSweeps() {
  const [list, workers] = await Promise.all([call('ListSweeps', {limit: 200}),
                                             call('ListWorkers')]);
  renderSweeps(list.sweeps);
  const alive = workers.workers.filter((w) => w.alive).length;
  document.getElementById('workers').textContent =
      `${alive} of ${workers.workers.length} workers alive`;
  return list.sweeps;
}

async function poll() {
  try {
    await refreshSweeps();
    await refreshSweep();
    showError(null);
  } catch (error) {
    showError(error);
    pollTimer = setTimeout(poll, POLL_MS);
  }
}

function select(sweepId) {
  selectedSweep = String(sweepId);
  history.replaceState(null, '', '#sweep=' + selectedSweep);
  clearTimeout(pollTimer);
  poll();
}

async function start() {
  try {
    const sweeps = await refreshSweeps();
    const fromUrl = new URLSearchParams(location.hash.slice(1)).get('sweep');
    if (fromUrl) select(fromUrl);
    else if (sweeps.length) select(sweeps[0].sweep_id);
    else document.body.dataset.state = 'empty';
  } catch (error) {
    showError(error);
  }
}

start();
