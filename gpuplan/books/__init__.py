"""The books: spend from instance rows (ledger), budgets as hard caps, reports and plots, estimate vs actual."""
