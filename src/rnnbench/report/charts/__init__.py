"""The matplotlib figures, from records only: overview (all_charts: every chart the records hold; the sweep's
time, speedup and roofline charts), bars, growth, heatmap, over style (series, looks, figure plumbing)."""
