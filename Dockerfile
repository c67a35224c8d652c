FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /transit ./cmd/transit

FROM gcr.io/distroless/static-debian12
COPY --from=build /transit /transit
EXPOSE 9090
ENTRYPOINT ["/transit"]
