"""Reusable Panel pieces of the pages: Step/Play player, data controls, upload, banner, downloads, layouts."""
