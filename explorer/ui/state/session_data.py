"""The data a user gave in one browser session, offered by every page of that session.

An upload (or points clicked on a 2-D page) on one page is the ``uploaded`` data set of every
page: each page's :class:`~explorer.ui.state.data_model.DataModel` is given the session's one
:class:`SessionData` (the gallery makes one per browser session) and offers ``uploaded`` as soon
as the store holds something. The store keeps only the user's own data, in the server's memory
for as long as the session lives: a link cannot carry it, so a link naming ``dataset=uploaded``
says that the file must be uploaded again.

No Panel import: this is a model object (see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import param

from explorer.core.data import IncompleteData

__all__ = ["SessionData"]


class SessionData(param.Parameterized):
    """One browser session's user data (see the module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from explorer.ui.state.data_model import DataModel
    >>> session = SessionData()
    >>> a, b = DataModel(dataset="iris", session=session), DataModel(dataset="wine", session=session)
    >>> a.set_points(np.arange(20.0).reshape(10, 2))
    >>> b.has_uploaded, b.dataset
    (True, 'wine')
    """

    uploaded = param.ClassSelector(class_=IncompleteData, default=None, allow_None=True, constant=True,
                                   doc="The user's last upload or clicked points (None: nothing given yet)")
    revision = param.Integer(default=0, constant=True, doc="Increases with every new upload")

    def put(self, data: IncompleteData) -> None:
        """Make ``data`` the session's ``uploaded`` data set (every page sharing the store is told)."""
        with param.edit_constant(self):
            self.param.update(uploaded=data, revision=self.revision + 1)
