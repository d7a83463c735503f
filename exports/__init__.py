"""Writers: Excel workbooks, reports, plots."""
