# Step 2 (deliberately wrong): the column is called "revenue", not
# "sales_amount". The run fails with a KeyError traceback and, because it
# failed, reports no artifacts.
import matplotlib
matplotlib.use("Agg")
import pandas as pd
import seaborn as sns

df = pd.read_csv("/mnt/data/marketing.csv", parse_dates=["date"])
totals = df.groupby("channel")["sales_amount"].sum()
ax = sns.barplot(x=totals.index, y=totals.values)
ax.figure.savefig("/mnt/data/revenue_by_channel.png")
