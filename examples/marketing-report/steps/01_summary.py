# Step 1: load the uploaded CSV and summarise it with pandas.
import pandas as pd

df = pd.read_csv("/mnt/data/marketing.csv", parse_dates=["date"])
print(f"Processed {len(df)} rows, {df['date'].min():%Y-%m-%d} to {df['date'].max():%Y-%m-%d}")
by_channel = (
    df.groupby("channel")[["spend", "clicks", "conversions", "revenue"]]
    .sum()
    .assign(roas=lambda t: t["revenue"] / t["spend"], cpa=lambda t: t["spend"] / t["conversions"])
    .sort_values("revenue", ascending=False)
)
print(by_channel.round(2).to_string())
by_channel.round(2).to_csv("/mnt/data/summary_by_channel.csv")
