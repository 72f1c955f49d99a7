// A grouped bar chart as plain SVG text, with a log-scale axis: a full LIST of 50,000 pods takes
// thousands of times longer than a GET of one, and on a linear axis the small bars would vanish.

export interface Series {
  name: string;
  color: string;
}

export interface Group {
  label: string;
  /** One value per series, in series order; null where there is no measurement. */
  values: (number | null)[];
}

export interface Chart {
  title: string;
  subtitle: string;
  unit: string;
  series: Series[];
  groups: Group[];
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Splits a label into lines of about `width` characters at spaces, so group labels do not overlap. */
function wrap(label: string, width: number): string[] {
  const lines: string[] = [];
  for (const word of label.split(' ')) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last]!.length + 1 + word.length <= width) lines[last] += ` ${word}`;
    else lines.push(word);
  }
  return lines;
}

function fmt(v: number): string {
  if (v >= 100) return v.toFixed(0);
  if (v >= 10) return v.toFixed(1);
  if (v >= 1) return v.toFixed(2);
  return v.toFixed(3);
}

export function barChart(c: Chart): string {
  const values = c.groups.flatMap((g) => g.values).filter((v): v is number => v !== null && v > 0);
  const lo = Math.floor(Math.log10(Math.min(...values)));
  const hi = Math.ceil(Math.log10(Math.max(...values)) + 0.15); // room for the value labels
  const barW = 26;
  const gap = 4;
  const groupW = c.series.length * (barW + gap) + 60;
  const left = 70;
  const top = 70;
  const plotH = 300;
  const width = left + c.groups.length * groupW + 20;
  const height = top + plotH + 130;
  const y = (v: number): number => top + plotH - ((Math.log10(v) - lo) / (hi - lo)) * plotH;

  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(`<text x="${left}" y="24" font-size="16" font-weight="bold">${esc(c.title)}</text>`);
  out.push(`<text x="${left}" y="44" fill="#555">${esc(c.subtitle)}</text>`);
  for (let e = lo; e <= hi; e++) {
    const yy = y(10 ** e);
    out.push(`<line x1="${left}" x2="${width - 20}" y1="${yy}" y2="${yy}" stroke="#ddd"/>`);
    out.push(`<text x="${left - 8}" y="${yy + 4}" text-anchor="end" fill="#555">${esc(String(Number((10 ** e).toPrecision(1))))}</text>`);
  }
  out.push(`<text transform="translate(18 ${top + plotH / 2}) rotate(-90)" text-anchor="middle" fill="#555">${esc(c.unit)} (log scale)</text>`);
  out.push(`<line x1="${left}" x2="${left}" y1="${top}" y2="${top + plotH}" stroke="#888"/>`);
  c.groups.forEach((g, gi) => {
    const x0 = left + gi * groupW + 30;
    g.values.forEach((v, si) => {
      if (v === null || v <= 0) return;
      const x = x0 + si * (barW + gap);
      const yy = y(v);
      out.push(`<rect x="${x}" y="${yy.toFixed(1)}" width="${barW}" height="${(top + plotH - yy).toFixed(1)}" fill="${c.series[si]!.color}"><title>${esc(`${c.series[si]!.name}: ${fmt(v)} ${c.unit}`)}</title></rect>`);
      out.push(`<text x="${x + barW / 2}" y="${(yy - 4).toFixed(1)}" text-anchor="middle" font-size="10">${esc(fmt(v))}</text>`);
    });
    const cx = x0 + (c.series.length * (barW + gap) - gap) / 2;
    wrap(g.label, 20).forEach((line, li) => {
      out.push(`<text x="${cx}" y="${top + plotH + 18 + li * 14}" text-anchor="middle">${esc(line)}</text>`);
    });
  });
  out.push(`<line x1="${left}" x2="${width - 20}" y1="${top + plotH}" y2="${top + plotH}" stroke="#888"/>`);
  c.series.forEach((s, si) => {
    const x = left + si * 210;
    const yy = top + plotH + 95;
    out.push(`<rect x="${x}" y="${yy}" width="12" height="12" fill="${s.color}"/>`);
    out.push(`<text x="${x + 18}" y="${yy + 10}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
