"""Panel / HoloViews views (layer L3): ``pn.viewable.Viewer`` classes rendering the models."""
