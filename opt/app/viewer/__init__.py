"""Self-contained HTML viewer of P1 placement schedules and P3 serving plans.

:func:`opt.app.viewer.html.write_view` writes one offline HTML file (no CDN, no server): the page's
JS/CSS (``opt/app/viewer/static``) inlined, the data as a gzip+base64 columnar payload
(:mod:`opt.app.viewer.payload`). Imports only from ``opt``.
"""
