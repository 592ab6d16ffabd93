"""Search: reading pasted tool output (`tool_output`), the query plan and its signatures (`analysis`,
`query`), and the one place that ranks candidates (`ranking`, with its fitted `ranking_weights.json`).
"""
