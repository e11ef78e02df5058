"""The HTML, from records only: one report page (html) and the published site (build), the charts it publishes
(published) and records made fit to publish (scrub)."""
