/**
 * A uPlot time-series chart as a component: created once, fed new data on every render,
 * resized with its container (narrow windows included), destroyed with the component.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  readonly label: string;
  readonly color: string;
}

const CHART_HEIGHT_PX = 180;
/** Colour of series past the palette, in order. */
export const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2',
  '#db2777', '#4b5563', '#65a30d'];

function options(title: string, unit: string, series: readonly ChartSeries[],
  width: number): uPlot.Options {
  return {
    title,
    width,
    height: CHART_HEIGHT_PX,
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(max, 1)] } },
    axes: [{}, { label: unit, size: 60 }],
    // No line across a second without calls: a gap says "nothing measured", not zero.
    series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2,
      spanGaps: false }))],
    legend: { live: true },
  };
}

export function Chart({ title, unit, series, data }: {
  title: string; unit: string; series: readonly ChartSeries[];
  data: ReadonlyArray<ReadonlyArray<number | null>>;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => s.label).join('\u0000');
  useEffect(() => {
    const element = box.current;
    if (element === null) return;
    const chart = new uPlot(options(title, unit, series, element.clientWidth || 300),
      data as uPlot.AlignedData, element);
    plot.current = chart;
    const observer = new ResizeObserver(() => {
      chart.setSize({ width: element.clientWidth || 300, height: CHART_HEIGHT_PX });
    });
    observer.observe(element);
    return () => {
      observer.disconnect();
      chart.destroy();
      plot.current = null;
    };
    // A new set of series (a refusal reason appeared) needs a new chart.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shape]);
  useEffect(() => {
    plot.current?.setData(data as uPlot.AlignedData);
  });
  return <div class="chart" ref={box} role="img" aria-label={title} />;
}
